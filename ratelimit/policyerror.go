package ratelimit

// PolicyReason says which rule a [PolicyError] reports.
type PolicyReason uint8

// The rules a policy's fields follow.
const (
	// ReasonInvalid breaks a rule on the policy as a whole (Field is empty),
	// such as gcra's bound on burst/rate.
	ReasonInvalid PolicyReason = iota
	// ReasonMissing: Algorithm is empty.
	ReasonMissing
	// ReasonUnknown: the algorithm or leaky_bucket mode is not one sluice defines.
	ReasonUnknown
	// ReasonNotApplicable: the field is set but the algorithm does not take it.
	ReasonNotApplicable
	// ReasonNotPositive: a rate or window is zero or negative.
	ReasonNotPositive
	// ReasonTooSmall: the value is below the field's minimum (an amount
	// below 1, a rate below MinRate, a negative max_delay).
	ReasonTooSmall
	// ReasonTooLarge: the value is above the field's maximum (MaxAmount,
	// MaxRate or MaxWindow).
	ReasonTooLarge
	// ReasonNotFinite: the rate is NaN or infinite.
	ReasonNotFinite
	// ReasonNotWhole: the window is not a whole number of microseconds.
	ReasonNotWhole
	// ReasonShapeOnly: max_delay is set but the mode is not shape.
	ReasonShapeOnly
)

// PolicyError describes one problem [NewPolicy] finds in a [PolicyConfig],
// in the manner of encoding/json's UnmarshalTypeError: it names the field so
// that a caller can point at where the value came from. It wraps
// [ErrInvalidPolicy].
type PolicyError struct {
	// Field is the field at fault as configuration files name it
	// ("capacity", "max_delay"); empty for a rule on the policy as a whole.
	Field string
	// Value is the value given for Field (an int64, float64,
	// time.Duration, Algorithm or Mode); nil when Field is empty.
	Value any
	// Reason is the rule Value breaks.
	Reason PolicyReason
	// Takes lists the fields the algorithm takes, for ReasonNotApplicable;
	// nil otherwise.
	Takes []string
	// Detail states the problem in a sentence, such as "capacity must be at
	// least 1, got 0".
	Detail string
}

// Error returns "invalid policy: " followed by Detail.
func (e *PolicyError) Error() string { return ErrInvalidPolicy.Error() + ": " + e.Detail }

// Unwrap returns ErrInvalidPolicy.
func (e *PolicyError) Unwrap() error { return ErrInvalidPolicy }

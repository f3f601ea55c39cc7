package memory

import "hash/maphash"

// digest stands for a key in the store's tables: two 64-bit hashes of the
// key under two independent secret seeds. Only the digest is kept, never the
// key's bytes, so a tracked key costs the same whatever its length.
//
// The seeds are random per Store (maphash.MakeSeed) and never leave the
// process, so a client cannot compute digests and cannot aim a key at
// another's. Two keys are taken for the same key when all 127 compared bits
// agree (hash with hashMark set, and check). Taking each seeded hash as a
// random function of the key, a key the table does not hold matches a given
// tracked key with probability 2^-127, so among q keys sent while at most n
// are tracked the chance that any is mistaken is below q·n/2^127: 2^40
// requests against a full default table (2^20 keys) give 2^-67. A mistaken
// key would share the other key's budget, never get one beyond it. maphash
// is not a cryptographic hash: the bound assumes what it is built for, a
// uniform 64-bit output per seed for a client that does not know the seed
// (the runtime's map hashing relies on the same against hash flooding),
// with two seeds selecting independent functions. A stronger guarantee
// would take a keyed cryptographic hash on every decision.
type digest struct {
	hash  uint64 // low bits: the shard; bits from slotShift up: the home slot
	check uint64 // tells apart keys of equal hash
}

// seeds are a Store's two secret hash seeds.
type seeds struct{ hash, check maphash.Seed }

// newSeeds returns two fresh random seeds.
func newSeeds() seeds { return seeds{hash: maphash.MakeSeed(), check: maphash.MakeSeed()} }

// digest returns key's digest. It does not allocate.
func (s *Store) digest(key string) digest {
	return digest{hash: maphash.String(s.seeds.hash, key), check: maphash.String(s.seeds.check, key)}
}

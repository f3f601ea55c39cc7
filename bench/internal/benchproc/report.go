package benchproc

import (
	"io"
	"os"
)

// WriteReport writes text to w and, when path is not empty, also to the file
// at path. Only an error writing the file is returned.
func WriteReport(w io.Writer, text, path string) error {
	io.WriteString(w, text)
	if path == "" {
		return nil
	}
	return os.WriteFile(path, []byte(text), 0o644)
}

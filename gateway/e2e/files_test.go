package e2e

import (
	"os"
	"path/filepath"
)

// writeFileAtomic replaces path by renaming a temporary file over it, the
// way editors and config management do, so sluice never reads half a file.
func writeFileAtomic(path, data string) error {
	tmp := filepath.Join(filepath.Dir(path), ".tmp-"+filepath.Base(path))
	if err := os.WriteFile(tmp, []byte(data), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

package sandbox

import (
	"errors"
	"fmt"
	"path"
	"strings"
)

// ErrUnsafeArchive is returned (wrapped) by Import for an archive entry
// that would be written outside the workspace.
var ErrUnsafeArchive = errors.New("unsafe archive entry")

// CheckArchiveName validates a tar entry name for extraction into a
// workspace and returns it cleaned and relative ("a/b"; "." for the root
// itself). Absolute names and names with ".." components are refused,
// whether or not they would end up inside after cleaning: a snapshot made
// by Export never contains them, so their presence means a crafted archive.
// Backends that extract on their own (Docker's archive API, a provider's
// upload) use it to vet entries first.
func CheckArchiveName(name string) (string, error) {
	if name == "" {
		return "", fmt.Errorf("%w: empty name", ErrUnsafeArchive)
	}
	if strings.HasPrefix(name, "/") {
		return "", fmt.Errorf("%w: %q is absolute; names must be relative to the workspace root", ErrUnsafeArchive, name)
	}
	if strings.ContainsRune(name, 0) || strings.Contains(name, `\`) {
		return "", fmt.Errorf("%w: %q contains a NUL or backslash", ErrUnsafeArchive, name)
	}
	for seg := range strings.SplitSeq(name, "/") {
		if seg == ".." {
			return "", fmt.Errorf("%w: %q has a \"..\" component; names must stay inside the workspace root", ErrUnsafeArchive, name)
		}
	}
	return path.Clean(name), nil
}

// CheckHardlinkTarget validates the target of a hard-link entry the same
// way as a name: hard links must point at another entry of the archive.
func CheckHardlinkTarget(name, target string) (string, error) {
	clean, err := CheckArchiveName(target)
	if err != nil {
		return "", fmt.Errorf("hard link %q: %w", name, err)
	}
	if clean == "." {
		return "", fmt.Errorf("%w: hard link %q points at the workspace root", ErrUnsafeArchive, name)
	}
	return clean, nil
}

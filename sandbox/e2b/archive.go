package e2b

import (
	"archive/tar"
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/sandbot/sandbot/sandbox"
)

// ioBuffer sizes the buffered readers and writers around archive streams.
const ioBuffer = 1 << 20

// importScript empties the workspace $1, extracts the archive $2 into it
// as the sandbox user, and removes the archive whatever happened. A
// command may have left read-only directories behind; the owner can make
// them writable again.
const importScript = `cd "$1" || { rm -f "$2"; exit 2; }
find . -mindepth 1 -maxdepth 1 -exec rm -rf {} + 2>/dev/null || { chmod -R u+rwX . 2>/dev/null; find . -mindepth 1 -maxdepth 1 -exec rm -rf {} +; }
tar -xf "$2" -C "$1" --no-same-owner
rc=$?
rm -f "$2"
exit $rc`

// Import replaces the workspace with the archive's contents. The archive
// is vetted and rewritten into a spool file on the worker first
// (sandbox.VetArchive), so an unsafe or truncated archive is refused
// before anything is uploaded or the workspace touched. It is then
// uploaded to a unique file in the sandbox's /tmp and extracted by the
// sandbox's own tar after the workspace is emptied.
func (b *Backend) Import(ctx context.Context, h sandbox.Handle, r io.Reader) error {
	id, err := b.sandboxID("import", h)
	if err != nil {
		return err
	}
	workdir := b.workdir(h)
	// Fail fast on a sandbox that is gone, before spooling the archive.
	if _, err := b.ready(ctx, "import", id); err != nil {
		return err
	}
	spool, err := os.CreateTemp("", "sandbot-e2b-import-*.tar")
	if err != nil {
		return fmt.Errorf("e2b: import: spool: %w", err)
	}
	defer os.Remove(spool.Name())
	defer spool.Close()
	bw := bufio.NewWriterSize(spool, ioBuffer)
	if err := sandbox.VetArchive(ctx, bufio.NewReaderSize(r, ioBuffer), tar.NewWriter(bw), sandbox.Owner{UID: 1000, GID: 1000}); err != nil {
		return fmt.Errorf("e2b: import: %w", err)
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("e2b: import: spool: %w", err)
	}
	size, err := spool.Seek(0, io.SeekCurrent)
	if err != nil {
		return fmt.Errorf("e2b: import: spool: %w", err)
	}
	remote := "/tmp/sandbot-import-" + sandbox.RandomHex(8) + ".tar"
	resp, _, err := b.sendEnvd(ctx, "import: upload", id, func(e *envd) *request {
		return &request{
			op: "import: upload", method: http.MethodPost, path: "/files", env: e,
			query:       url.Values{"path": {remote}, "username": {b.opts.User}},
			contentType: "application/octet-stream",
			body: func() (io.Reader, int64, error) {
				if _, err := spool.Seek(0, io.SeekStart); err != nil {
					return nil, 0, err
				}
				return bufio.NewReaderSize(spool, ioBuffer), size, nil
			},
		}
	})
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	code, msg, err := b.helper(ctx, "import: extract", id, []string{"/bin/sh", "-c", importScript, "sandbot-import", workdir, remote}, "/", nil)
	if err != nil {
		b.removeTemp(ctx, id, remote)
		return err
	}
	if code != 0 {
		return fmt.Errorf("e2b: import: extract: exit status %d: %s", code, msg)
	}
	return nil
}

// Export writes the workspace as a tar stream with names relative to the
// workspace root: the sandbox's tar writes it to a unique file in /tmp,
// the worker downloads it through sandbox.RerootArchive (which drops
// owners, special files and the root entry), and the file is removed.
func (b *Backend) Export(ctx context.Context, h sandbox.Handle, w io.Writer) error {
	id, err := b.sandboxID("export", h)
	if err != nil {
		return err
	}
	workdir := b.workdir(h)
	remote := "/tmp/sandbot-export-" + sandbox.RandomHex(8) + ".tar"
	defer b.removeTemp(ctx, id, remote)
	code, msg, err := b.helper(ctx, "export: archive", id, []string{"tar", "-cf", remote, "-C", workdir, "."}, "/", nil)
	if err != nil {
		return err
	}
	if code != 0 {
		return fmt.Errorf("e2b: export: archive: exit status %d: %s", code, msg)
	}
	resp, _, err := b.sendEnvd(ctx, "export: download", id, func(e *envd) *request {
		return &request{op: "export: download", method: http.MethodGet, path: "/files", env: e,
			query: url.Values{"path": {remote}, "username": {b.opts.User}}}
	})
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if err := sandbox.RerootStream(ctx, resp.Body, w, ""); err != nil {
		return fmt.Errorf("e2b: export: %w", err)
	}
	return nil
}

// removeTemp deletes a temporary file in the sandbox, even after ctx
// ended; a failure only leaves a file in the sandbox's /tmp.
func (b *Backend) removeTemp(ctx context.Context, id, p string) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	if _, _, err := b.helper(cctx, "remove temporary file", id, []string{"rm", "-f", "--", p}, "/", nil); err != nil {
		b.log.Debug("e2b: cannot remove a temporary file", "sandbox", id, "path", p, "error", err)
	}
}

// clockSkew is how far the sandbox's clock may be ahead of the worker's:
// Fingerprint treats entries stamped after its start minus this as racy.
const clockSkew = 2 * time.Second

// Fingerprint digests the workspace's metadata (paths, types, sizes,
// modes, times, inodes, symlink targets) with one command; no file
// contents are read. An entry stamped within clockSkew of the call makes
// the fingerprint unique (see sandbox.ListingDigest).
func (b *Backend) Fingerprint(ctx context.Context, h sandbox.Handle) (string, error) {
	id, err := b.sandboxID("fingerprint", h)
	if err != nil {
		return "", err
	}
	started := time.Now()
	digest := sandbox.NewListingDigest(started.Add(-clockSkew))
	if _, err := b.ready(ctx, "fingerprint", id); err != nil {
		return "", err
	}
	code, msg, err := b.helper(ctx, "fingerprint", id, []string{"/bin/sh", "-c", sandbox.FingerprintScript, "sandbot-fingerprint", b.workdir(h)}, "/", digest)
	if err != nil {
		return "", err
	}
	if code != 0 {
		return "", fmt.Errorf("e2b: fingerprint: exit status %d: %s", code, strings.TrimSpace(msg))
	}
	return digest.Fingerprint(), nil
}

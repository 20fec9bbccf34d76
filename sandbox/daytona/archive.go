package daytona

import (
	"archive/tar"
	"bufio"
	"context"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/sandbot/sandbot/sandbox"
)

// ioBuffer sizes the buffered readers and writers around archive streams.
const ioBuffer = 1 << 20

// archiveTimeout bounds tar inside the sandbox (the daemon kills it).
const archiveTimeout = 5 * time.Minute

// extractScript empties the workspace $1 (a command may have left
// read-only directories; the owner can make them writable again), then
// extracts the archive $2 into it, owned by whoever extracts, and removes
// the archive whatever happened.
const extractScript = `mkdir -p -- "$1" && cd "$1" || { rm -f -- "$2"; exit 2; }
if ! find . -mindepth 1 -maxdepth 1 -exec rm -rf {} + 2>/dev/null; then
	chmod -R u+rwX . 2>/dev/null
	find . -mindepth 1 -maxdepth 1 -exec rm -rf {} +
fi
tar -xpf "$2" -C "$1" --no-same-owner
rc=$?
rm -f -- "$2"
exit $rc`

// Import replaces the workspace with the archive's contents. The archive is
// checked and rewritten into a temporary file on the worker first
// (sandbox.VetArchive), so a bad or truncated archive is refused before
// anything reaches the sandbox; only then is it uploaded to a temporary
// file in the sandbox, the workspace cleared and the archive extracted by
// the sandbox's tar.
func (b *Backend) Import(ctx context.Context, h sandbox.Handle, r io.Reader) error {
	workdir := b.workdir(h)
	spool, err := os.CreateTemp("", "sandbot-daytona-import-*.tar")
	if err != nil {
		return fmt.Errorf("daytona: import: spool: %w", err)
	}
	defer os.Remove(spool.Name())
	defer spool.Close()
	bw := bufio.NewWriterSize(spool, ioBuffer)
	if err := sandbox.VetArchive(ctx, bufio.NewReaderSize(r, ioBuffer), tar.NewWriter(bw), sandbox.Owner{UID: 1000, GID: 1000}); err != nil {
		return fmt.Errorf("daytona: import: %w", err)
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("daytona: import: spool: %w", err)
	}
	remote := "/tmp/sandbot-in-" + sandbox.RandomHex(8) + ".tar"
	if err := b.upload(ctx, h, "import: upload", remote, spool.Name()); err != nil {
		return err
	}
	code, out, err := b.sh(ctx, h, "import: extract", archiveTimeout, extractScript, workdir, remote)
	if err == nil && code != 0 {
		err = fmt.Errorf("daytona: import: extract: exit status %d: %s", code, strings.TrimSpace(out))
	}
	if err != nil {
		b.removeFile(ctx, h, remote)
		return err
	}
	return nil
}

// upload streams the local file to path in the sandbox with
// /files/bulk-upload, whose path part must precede the file part. The
// body is made anew for every attempt, from the file.
func (b *Backend) upload(ctx context.Context, h sandbox.Handle, op, path, local string) error {
	body := func() (io.Reader, string, error) {
		f, err := os.Open(local)
		if err != nil {
			return nil, "", err
		}
		pr, pw := io.Pipe()
		mw := multipart.NewWriter(pw)
		go func() {
			defer f.Close()
			err := mw.WriteField("files[0].path", path)
			if err == nil {
				var part io.Writer
				if part, err = mw.CreateFormFile("files[0].file", "archive.tar"); err == nil {
					_, err = io.Copy(part, bufio.NewReaderSize(f, ioBuffer))
				}
			}
			if err == nil {
				err = mw.Close()
			}
			pw.CloseWithError(err)
		}()
		return pr, mw.FormDataContentType(), nil
	}
	return b.tbCall(ctx, h, request{op: op, method: http.MethodPost, url: "/files/bulk-upload", body: body}, nil)
}

// removeFile deletes a temporary file in the sandbox, logging failures:
// it lives in /tmp, which the sandbox's next start empties anyway.
func (b *Backend) removeFile(ctx context.Context, h sandbox.Handle, path string) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	req := request{op: "remove temporary file", method: http.MethodDelete, url: "/files", query: url.Values{"path": {path}}}
	if err := b.tbCall(cctx, h, req, nil, http.StatusNotFound); err != nil && statusOf(err) != http.StatusNotFound {
		b.log.Warn("daytona: cannot remove temporary file", "sandbox", h.ID, "path", path, "error", err)
	}
}

// Export writes the workspace as a tar stream with names relative to the
// workspace root, in the local backend's format (sandbox.RerootArchive):
// the sandbox's tar writes it to a temporary file, which is streamed down
// and removed.
func (b *Backend) Export(ctx context.Context, h sandbox.Handle, w io.Writer) error {
	workdir := b.workdir(h)
	remote := "/tmp/sandbot-out-" + sandbox.RandomHex(8) + ".tar"
	defer b.removeFile(ctx, h, remote)
	code, out, err := b.sh(ctx, h, "export: tar", archiveTimeout, `cd "$1" && tar -cf "$2" .`, workdir, remote)
	if err != nil {
		return err
	}
	if code != 0 {
		return fmt.Errorf("daytona: export: tar: exit status %d: %s", code, strings.TrimSpace(out))
	}
	resp, err := b.tb(ctx, h, request{op: "export: download", method: http.MethodGet, url: "/files/download", query: url.Values{"path": {remote}}})
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if err := sandbox.RerootStream(ctx, resp.Body, w, ""); err != nil {
		return fmt.Errorf("daytona: export: %w", err)
	}
	return nil
}

func (b *Backend) workdir(h sandbox.Handle) string {
	if h.Workdir != "" {
		return h.Workdir
	}
	return b.opts.Workdir
}

package docker

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path"
	"strings"

	"github.com/moby/moby/client"

	"github.com/sandbot/sandbot/sandbox"
)

// ioBuffer sizes the buffered reader and writer around archive streams.
const ioBuffer = 1 << 20

// Export writes the workspace as a tar stream with names relative to the
// workspace root, in the local backend's format: directories (with a
// trailing "/"), regular files, symlinks and hard links, with permission
// bits and modification times, without owners. Other file types are
// skipped. A stopped container is read without being started.
func (b *Backend) Export(ctx context.Context, h sandbox.Handle, w io.Writer) error {
	id, workdir, err := b.container(h)
	if err != nil {
		return fmt.Errorf("docker: export: %w", err)
	}
	res, err := b.cli.CopyFromContainer(ctx, id, client.CopyFromContainerOptions{SourcePath: workdir})
	if err != nil {
		return b.classify("export", err)
	}
	defer res.Content.Close()
	// Docker names entries after the copied directory ("workspace/a.txt").
	prefix := path.Base(workdir) + "/"
	if res.Stat.Name != "" {
		prefix = res.Stat.Name + "/"
	}
	bw := bufio.NewWriterSize(w, ioBuffer)
	if err := sandbox.RerootArchive(tar.NewReader(bufio.NewReaderSize(res.Content, ioBuffer)), tar.NewWriter(bw), prefix); err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("docker: export: %w", ctx.Err())
		}
		return b.classify("export", err)
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("docker: export: %w", err)
	}
	return nil
}

// Import replaces the workspace with the archive's contents, owned by the
// sandbox user. The archive is checked and rewritten into a temporary file
// on the worker first, so a bad or truncated archive is refused before the
// workspace is touched: entries outside the workspace (absolute, "..",
// through a symlink of the archive, hard links to anything but an earlier
// file of the archive) fail with sandbox.ErrUnsafeArchive. Only an error
// from the daemon while extracting can leave the workspace partly filled.
func (b *Backend) Import(ctx context.Context, h sandbox.Handle, r io.Reader) error {
	id, workdir, err := b.container(h)
	if err != nil {
		return fmt.Errorf("docker: import: %w", err)
	}
	// Fail fast on a sandbox that is gone, before spooling the archive.
	if err := b.ensureRunning(ctx, "import", id); err != nil {
		return err
	}
	spool, err := os.CreateTemp("", "sandbot-docker-import-*.tar")
	if err != nil {
		return fmt.Errorf("docker: import: spool: %w", err)
	}
	defer os.Remove(spool.Name())
	defer spool.Close()
	bw := bufio.NewWriterSize(spool, ioBuffer)
	if err := sandbox.VetArchive(ctx, bufio.NewReaderSize(r, ioBuffer), tar.NewWriter(bw), sandbox.Owner{UID: b.uid, GID: b.gid}); err != nil {
		return fmt.Errorf("docker: import: %w", err)
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("docker: import: spool: %w", err)
	}
	if _, err := spool.Seek(0, io.SeekStart); err != nil {
		return fmt.Errorf("docker: import: spool: %w", err)
	}
	if err := b.clear(ctx, id, workdir); err != nil {
		return err
	}
	_, err = b.cli.CopyToContainer(ctx, id, client.CopyToContainerOptions{
		DestinationPath: workdir,
		Content:         bufio.NewReaderSize(spool, ioBuffer),
	})
	if err != nil {
		return b.classify("import: extract", err)
	}
	return nil
}

// clearScript empties the directory $1. A command may have left read-only
// directories behind; the owner can make them writable again.
const clearScript = `cd "$1" || exit 2
find . -mindepth 1 -maxdepth 1 -exec rm -rf {} + 2>/dev/null && exit 0
chmod -R u+rwX . 2>/dev/null
find . -mindepth 1 -maxdepth 1 -exec rm -rf {} +`

// clear empties the workspace, as the sandbox user.
func (b *Backend) clear(ctx context.Context, id, workdir string) error {
	var stderr bytes.Buffer
	code, err := b.run(ctx, "import: clear workspace", id, []string{"/bin/sh", "-c", clearScript, "sandbot-clear", workdir}, io.Discard, &limitedBuffer{buf: &stderr, n: 4096})
	if err != nil {
		return err
	}
	if code != 0 {
		return fmt.Errorf("docker: import: clear workspace: exit status %d: %s", code, strings.TrimSpace(stderr.String()))
	}
	return nil
}

// limitedBuffer keeps the first n bytes written to it and drops the rest.
type limitedBuffer struct {
	buf *bytes.Buffer
	n   int
}

func (l *limitedBuffer) Write(p []byte) (int, error) {
	if room := l.n - l.buf.Len(); room > 0 {
		l.buf.Write(p[:min(room, len(p))])
	}
	return len(p), nil
}

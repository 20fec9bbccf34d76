// Package blobstore is the snapshot store on gocloud.dev/blob: a directory
// for one machine (file:///var/lib/sandbot/snapshots) or S3-compatible
// storage for a cluster (s3://bucket?endpoint=...&use_path_style=true).
//
// Snapshots stream through it; nothing buffers a whole workspace in
// memory. Keys are laid out by sandbox.SnapshotKey and sandbox.SessionPrefix.
package blobstore

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"strings"
	"time"

	"gocloud.dev/blob"
	"gocloud.dev/blob/fileblob"
	"gocloud.dev/blob/s3blob"
	"gocloud.dev/gcerrors"

	"github.com/sandbot/sandbot/sandbox"
)

// copyBuffer is the buffer size for streaming into the store.
const copyBuffer = 1 << 20

// copyBuffers reuses the streaming buffers: a fresh 1 MiB buffer per Put
// is zeroed on allocation, which cost more than the write itself for the
// small objects most puts store (a transcript chunk per model call, a
// manifest part), about 0.7 ms each on the project's machine. A fixed free
// list rather than a sync.Pool: a pool is emptied by every other garbage
// collection and, under the race detector, drops a quarter of its puts on
// purpose, so whether a put allocated 1 MiB would depend on the collector.
// Four buffers cover the puts that run at once on a worker (a snapshot and
// a transcript chunk per session in flight rarely overlap more); a fifth
// concurrent put allocates its own and drops it.
var copyBuffers = make(chan *[]byte, 4)

// getCopyBuffer takes a streaming buffer from the free list, or makes one.
func getCopyBuffer() *[]byte {
	select {
	case p := <-copyBuffers:
		return p
	default:
		b := make([]byte, copyBuffer)
		return &b
	}
}

// putCopyBuffer returns a streaming buffer to the free list if it has room.
func putCopyBuffer(p *[]byte) {
	select {
	case copyBuffers <- p:
	default:
	}
}

// sized is a reader that knows how much it holds (bytes.Reader,
// bytes.Buffer, strings.Reader).
type sized interface{ Len() int }

// ErrNotFound is returned (wrapped) for a key that does not exist.
var ErrNotFound = sandbox.ErrSnapshotNotFound

// Store reads and writes snapshots. It is safe for concurrent use.
type Store struct {
	bucket *blob.Bucket
	where  string // URL without query, for messages
}

// Schemes lists the URL schemes Open accepts.
var Schemes = []string{fileblob.Scheme, s3blob.Scheme}

// Open opens the store at rawURL. For file:// URLs the directory is
// created if missing and temporary files are kept beside their targets
// (so the final rename never crosses file systems) unless the URL says
// otherwise; metadata sidecar files are not written. Directories the store
// creates are 0700 (dir_file_mode, unless the URL sets it) and snapshots
// are 0600 whatever the umask: a snapshot is a whole workspace, and the
// host's other users (or another session's sandbox running as another
// user) must not read it. An existing directory keeps its mode.
func Open(ctx context.Context, rawURL string) (*Store, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("blobstore: open: bad URL %q: %w", rawURL, err)
	}
	switch u.Scheme {
	case fileblob.Scheme:
		q := u.Query()
		for k, v := range map[string]string{"create_dir": "true", "no_tmp_dir": "true", "metadata": "skip", "dir_file_mode": "0700"} {
			if !q.Has(k) {
				q.Set(k, v)
			}
		}
		u.RawQuery = q.Encode()
	case s3blob.Scheme:
	default:
		return nil, fmt.Errorf("blobstore: open: unsupported scheme %q in %q; use one of %s (e.g. file:///var/lib/sandbot/snapshots or s3://bucket?region=us-east-1)",
			u.Scheme, redact(u), strings.Join(Schemes, ", "))
	}
	b, err := blob.OpenBucket(ctx, u.String())
	if err != nil {
		return nil, fmt.Errorf("blobstore: open %s: %w", redact(u), err)
	}
	return &Store{bucket: b, where: redact(u)}, nil
}

// redact drops the query (which may carry credentials) and user info.
func redact(u *url.URL) string {
	c := *u
	c.RawQuery, c.User = "", nil
	return c.String()
}

// Check lists the store once, so that a bucket that does not exist, or
// credentials that may not read it, show at start-up rather than at the
// first snapshot.
func (s *Store) Check(ctx context.Context) error {
	ok, err := s.bucket.IsAccessible(ctx)
	if err != nil {
		return fmt.Errorf("blobstore: %s cannot be listed: %w", s.where, err)
	}
	if !ok {
		return fmt.Errorf("blobstore: %s does not exist", s.where)
	}
	return nil
}

// Close releases the bucket.
func (s *Store) Close() error { return s.bucket.Close() }

// String names the store for logs.
func (s *Store) String() string { return s.where }

// Put streams r into key and returns the bytes written. The object appears
// only if r is read to EOF without error; a failed or canceled Put leaves
// any previous object under key as it was.
func (s *Store) Put(ctx context.Context, key string, r io.Reader) (int64, error) {
	if err := sandbox.CheckKey(key); err != nil {
		return 0, fmt.Errorf("blobstore: put: %w", err)
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w, err := s.bucket.NewWriter(wctx, key, &blob.WriterOptions{ContentType: "application/x-tar", BufferSize: 8 << 20, BeforeWrite: private})
	if err != nil {
		return 0, fmt.Errorf("blobstore: put %s: %w", key, err)
	}
	var buf []byte
	if sr, ok := r.(sized); ok && sr.Len() < copyBuffer {
		buf = make([]byte, max(sr.Len(), 512))
	} else {
		p := getCopyBuffer()
		defer putCopyBuffer(p)
		buf = *p
	}
	n, err := io.CopyBuffer(onlyWriter{w}, onlyReader{r}, buf)
	if err != nil {
		cancel() // abort: the writer discards what it has
		_ = w.Close()
		return n, fmt.Errorf("blobstore: put %s: %w", key, err)
	}
	if err := w.Close(); err != nil {
		return n, fmt.Errorf("blobstore: put %s: %w", key, err)
	}
	return n, nil
}

// FileMode is the mode of a snapshot in a file:// store.
const FileMode fs.FileMode = 0o600

// private makes the file a file:// store is about to write readable by its
// owner only, before any byte is written (fileblob creates it 0666 less
// the umask). Other stores have no file to change.
func private(as func(any) bool) error {
	var f *os.File
	if !as(&f) || f == nil {
		return nil
	}
	if err := f.Chmod(FileMode); err != nil {
		return fmt.Errorf("make snapshot private: %w", err)
	}
	return nil
}

// onlyReader hides WriterTo so the copy uses our buffer.
type onlyReader struct{ io.Reader }

// onlyWriter hides the blob writer's ReaderFrom, which io.CopyBuffer
// would call instead of using our buffer: it allocates a zeroed 1 MiB
// buffer of its own per call, so every put paid for one, a transcript
// chunk of a few hundred bytes included (TestSmallPutsAllocateLittle).
type onlyWriter struct{ io.Writer }

// Open returns a reader for key. The caller closes it. A missing key
// yields an error wrapping ErrNotFound.
func (s *Store) Open(ctx context.Context, key string) (io.ReadCloser, error) {
	if err := sandbox.CheckKey(key); err != nil {
		return nil, fmt.Errorf("blobstore: open %s: %w", key, err)
	}
	r, err := s.bucket.NewReader(ctx, key, nil)
	if err != nil {
		return nil, fmt.Errorf("blobstore: open %s: %w", key, notFound(err))
	}
	return r, nil
}

// Exists reports whether key exists.
func (s *Store) Exists(ctx context.Context, key string) (bool, error) {
	if err := sandbox.CheckKey(key); err != nil {
		return false, fmt.Errorf("blobstore: exists: %w", err)
	}
	ok, err := s.bucket.Exists(ctx, key)
	if err != nil {
		return false, fmt.Errorf("blobstore: exists %s: %w", key, err)
	}
	return ok, nil
}

// Copy copies from to to inside the store (server-side where the service
// supports it). A missing source yields an error wrapping ErrNotFound.
func (s *Store) Copy(ctx context.Context, from, to string) error {
	for _, k := range []string{from, to} {
		if err := sandbox.CheckKey(k); err != nil {
			return fmt.Errorf("blobstore: copy: %w", err)
		}
	}
	if err := s.bucket.Copy(ctx, to, from, &blob.CopyOptions{BeforeCopy: private}); err != nil {
		return fmt.Errorf("blobstore: copy %s to %s: %w", from, to, notFound(err))
	}
	return nil
}

// DeletePrefix deletes every key under prefix (which must end with "/",
// so "sessions/a/" never touches "sessions/ab/") and returns how many
// were deleted. Keys that vanish meanwhile are not an error.
func (s *Store) DeletePrefix(ctx context.Context, prefix string) (int, error) {
	if err := sandbox.CheckPrefix(prefix); err != nil {
		return 0, fmt.Errorf("blobstore: delete prefix: %w", err)
	}
	it := s.bucket.List(&blob.ListOptions{Prefix: prefix})
	n := 0
	for {
		obj, err := it.Next(ctx)
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return n, fmt.Errorf("blobstore: delete prefix %s: list: %w", prefix, err)
		}
		if obj.IsDir {
			continue
		}
		if err := s.bucket.Delete(ctx, obj.Key); err != nil && gcerrors.Code(err) != gcerrors.NotFound {
			return n, fmt.Errorf("blobstore: delete %s: %w", obj.Key, err)
		}
		n++
	}
}

// Delete removes key. A key that does not exist is not an error, so a
// retried delete succeeds.
func (s *Store) Delete(ctx context.Context, key string) error {
	if err := s.bucket.Delete(ctx, key); err != nil && gcerrors.Code(err) != gcerrors.NotFound {
		return fmt.Errorf("blobstore: delete %s: %w", key, err)
	}
	return nil
}

func notFound(err error) error {
	if gcerrors.Code(err) == gcerrors.NotFound {
		return fmt.Errorf("%w: %w", ErrNotFound, err)
	}
	return err
}

// OwnerKey holds the identity of the deployment that owns the store (see
// Claim).
const OwnerKey = "deployment"

// Claim records deployment as the store's owner unless another already
// is, and returns the owner. The write is conditional (it never replaces
// an existing owner), so two deployments racing to claim one empty store
// agree on a single winner. The sweeper deletes a session's snapshots only
// in a store its own deployment owns: a workflow unknown to this Temporal
// cluster says nothing about another cluster's sessions sharing a bucket.
func (s *Store) Claim(ctx context.Context, deployment string) (string, error) {
	if deployment == "" || strings.ContainsAny(deployment, "\n\x00") {
		return "", fmt.Errorf("blobstore: claim: bad deployment identity %q", deployment)
	}
	err := s.bucket.WriteAll(ctx, OwnerKey, []byte(deployment), &blob.WriterOptions{ContentType: "text/plain", IfNotExist: true, BeforeWrite: private})
	if err != nil && gcerrors.Code(err) != gcerrors.FailedPrecondition {
		return "", fmt.Errorf("blobstore: claim %s: %w", s.where, err)
	}
	owner, err := s.bucket.ReadAll(ctx, OwnerKey)
	if err != nil {
		return "", fmt.Errorf("blobstore: claim %s: read owner: %w", s.where, err)
	}
	return string(owner), nil
}

// SessionIDs lists the sessions that have objects in the store.
func (s *Store) SessionIDs(ctx context.Context) ([]string, error) {
	it := s.bucket.List(&blob.ListOptions{Prefix: sandbox.SessionsPrefix, Delimiter: "/"})
	var ids []string
	for {
		obj, err := it.Next(ctx)
		if err == io.EOF {
			return ids, nil
		}
		if err != nil {
			return ids, fmt.Errorf("blobstore: list sessions: %w", err)
		}
		if !obj.IsDir {
			continue
		}
		id, err := sandbox.SessionOfPrefix(obj.Key)
		if err != nil {
			continue // not written by us; leave it alone
		}
		ids = append(ids, id)
	}
}

// DeleteOlder deletes the keys under prefix last modified before cutoff and
// returns how many it deleted. Newer keys stay: a key written after the
// caller decided the prefix was dead belongs to whoever wrote it.
func (s *Store) DeleteOlder(ctx context.Context, prefix string, cutoff time.Time) (int, error) {
	if err := sandbox.CheckPrefix(prefix); err != nil {
		return 0, fmt.Errorf("blobstore: delete older: %w", err)
	}
	it := s.bucket.List(&blob.ListOptions{Prefix: prefix})
	n := 0
	for {
		obj, err := it.Next(ctx)
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return n, fmt.Errorf("blobstore: delete older %s: list: %w", prefix, err)
		}
		if obj.IsDir || !obj.ModTime.Before(cutoff) {
			continue
		}
		if err := s.Delete(ctx, obj.Key); err != nil {
			return n, err
		}
		n++
	}
}

// ModTime returns when key was last written. A missing key yields an
// error wrapping ErrNotFound.
func (s *Store) ModTime(ctx context.Context, key string) (time.Time, error) {
	if err := sandbox.CheckKey(key); err != nil {
		return time.Time{}, fmt.Errorf("blobstore: attributes: %w", err)
	}
	a, err := s.bucket.Attributes(ctx, key)
	if err != nil {
		return time.Time{}, fmt.Errorf("blobstore: attributes %s: %w", key, notFound(err))
	}
	return a.ModTime, nil
}

// List calls fn with every key under prefix and when it was last
// written, in key order.
func (s *Store) List(ctx context.Context, prefix string, fn func(key string, modTime time.Time) error) error {
	if err := sandbox.CheckPrefix(prefix); err != nil {
		return fmt.Errorf("blobstore: list: %w", err)
	}
	it := s.bucket.List(&blob.ListOptions{Prefix: prefix})
	for {
		obj, err := it.Next(ctx)
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("blobstore: list %s: %w", prefix, err)
		}
		if obj.IsDir {
			continue
		}
		if err := fn(obj.Key, obj.ModTime); err != nil {
			return err
		}
	}
}

// OpenRange returns a reader for length bytes of key from offset. A
// missing key yields an error wrapping ErrNotFound.
func (s *Store) OpenRange(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error) {
	if err := sandbox.CheckKey(key); err != nil {
		return nil, fmt.Errorf("blobstore: open %s: %w", key, err)
	}
	r, err := s.bucket.NewRangeReader(ctx, key, offset, length, nil)
	if err != nil {
		return nil, fmt.Errorf("blobstore: open %s: %w", key, notFound(err))
	}
	return r, nil
}

package sandbox

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/sandbot/sandbot/session"
	"go.temporal.io/sdk/temporal"
)

// Files into and out of a workspace, on the worker: chat attachments are
// saved under attachments/ (SaveAttachments), and the share_file tool reads
// one file (ReadFile). On a Tree backend the worker writes and reads the
// host directory itself through an os.Root, which refuses every path and
// symlink that leads out of the workspace; elsewhere it runs small
// commands in the sandbox, which is confined anyway.

// ErrTypeFileRefused: ReadFile will not share that path (outside the
// workspace, a directory, too large...). The message is for the model.
const ErrTypeFileRefused = "SandboxFileRefused"

// Fetcher downloads a chat attachment into w, at most max bytes
// (attach.Fetcher implements it). It returns the bytes written and the
// content type the file host named; beyond max it fails with an error for
// which IsTooLarge is true (ErrAttachmentTooLarge).
type Fetcher interface {
	Fetch(ctx context.Context, a session.Attachment, max int64, w io.Writer) (int64, string, error)
}

// AttachLimits are the worker's caps on attachments (SANDBOT_ATTACH_*);
// zero fields take the defaults below.
type AttachLimits struct {
	MaxFiles      int
	MaxFileBytes  int64
	MaxTotalBytes int64
	// VisionMaxBytes, when positive, stores images (png, jpeg, gif, webp)
	// up to that size in the snapshot store for a vision model
	// (SANDBOT_MODEL_VISION).
	VisionMaxBytes int64
}

// Attachment defaults.
const (
	DefaultAttachMaxFiles      = 10
	DefaultAttachMaxFileBytes  = 20 << 20
	DefaultAttachMaxTotalBytes = 50 << 20
	// DefaultShareMaxBytes is the share_file cap (SANDBOT_SHARE_MAX_BYTES).
	DefaultShareMaxBytes = session.MaxShareBytesCeiling
)

func (l AttachLimits) withDefaults() AttachLimits {
	if l.MaxFiles <= 0 {
		l.MaxFiles = DefaultAttachMaxFiles
	}
	if l.MaxFileBytes <= 0 {
		l.MaxFileBytes = DefaultAttachMaxFileBytes
	}
	if l.MaxTotalBytes <= 0 {
		l.MaxTotalBytes = DefaultAttachMaxTotalBytes
	}
	return l
}

// SaveAttachmentsRequest is the input of SaveAttachments.
type SaveAttachmentsRequest struct {
	Handle Handle               `json:"handle"`
	Files  []session.Attachment `json:"files"`
}

// SavedAttachment is a file saved into the workspace.
type SavedAttachment struct {
	// Name is the file's name in the chat; Path where it is in the
	// workspace (attachments/<safe name>).
	Name     string `json:"name"`
	Path     string `json:"path"`
	Size     int64  `json:"size"`
	MimeType string `json:"mime_type"`
	// Image is set when the file was also stored for a vision model.
	Image *session.ImageRef `json:"image,omitempty"`
}

// RefusedAttachment is a file that was not saved, and why (for the user
// and the model: it names the file, its size and the limit).
type RefusedAttachment struct {
	Name   string `json:"name"`
	Size   int64  `json:"size"`
	Reason string `json:"reason"`
}

// SaveAttachmentsResult says what SaveAttachments did with each file.
type SaveAttachmentsResult struct {
	Saved   []SavedAttachment   `json:"saved,omitempty"`
	Refused []RefusedAttachment `json:"refused,omitempty"`
}

// SaveAttachments downloads a message's attachments (with the worker's
// Fetcher, outside the sandbox) into the workspace's attachments/
// directory, under sanitised, distinct names, within the caps. A file it
// cannot or may not save is reported in Refused, never dropped silently.
// It runs on the handle's task queue, where the workspace is.
func (a *Activities) SaveAttachments(ctx context.Context, req SaveAttachmentsRequest) (res SaveAttachmentsResult, err error) {
	defer func() { err = RedactError(a.Redactor, err) }()
	b, err := a.backend(req.Handle.Backend)
	if err != nil {
		return res, err
	}
	if a.Fetcher == nil {
		for _, f := range req.Files {
			res.Refused = append(res.Refused, RefusedAttachment{Name: f.Name, Size: f.Size, Reason: "this worker does not download attachments"})
		}
		return res, nil
	}
	stop := HeartbeatWhileRunning(ctx)
	defer stop()
	lim := a.Attach.withDefaults()
	ws, err := a.workspaceFiles(b, req.Handle)
	if err != nil {
		return res, err
	}
	taken, err := ws.names(ctx)
	if err != nil {
		return res, classify("list "+session.AttachmentsDir, err)
	}
	var total int64
	for i, f := range req.Files {
		refuse := func(size int64, format string, args ...any) {
			res.Refused = append(res.Refused, RefusedAttachment{Name: f.Name, Size: size, Reason: fmt.Sprintf(format, args...)})
		}
		switch {
		case i >= lim.MaxFiles:
			refuse(f.Size, "a message may bring at most %d files (SANDBOT_ATTACH_MAX_FILES)", lim.MaxFiles)
			continue
		case f.Size > lim.MaxFileBytes:
			refuse(f.Size, "it is %s; a file may be at most %s (SANDBOT_ATTACH_MAX_FILE_BYTES)", FormatBytes(f.Size), FormatBytes(lim.MaxFileBytes))
			continue
		case total+f.Size > lim.MaxTotalBytes:
			refuse(f.Size, "it is %s, and the message's files may be at most %s together (SANDBOT_ATTACH_MAX_TOTAL_BYTES)", FormatBytes(f.Size), FormatBytes(lim.MaxTotalBytes))
			continue
		}
		max := min(lim.MaxFileBytes, lim.MaxTotalBytes-total)
		tmp, err := os.CreateTemp("", "sandbot-attachment-*")
		if err != nil {
			return res, fmt.Errorf("sandbox: attachment spool: %w", err)
		}
		n, ct, ferr := a.Fetcher.Fetch(ctx, f, max, tmp)
		if ferr == nil {
			_, ferr = tmp.Seek(0, io.SeekStart)
		}
		saved, serr := func() (SavedAttachment, error) {
			defer func() { _ = tmp.Close(); _ = os.Remove(tmp.Name()) }()
			if ferr != nil {
				return SavedAttachment{}, ferr
			}
			head := make([]byte, 512)
			k, _ := io.ReadFull(tmp, head)
			if _, err := tmp.Seek(0, io.SeekStart); err != nil {
				return SavedAttachment{}, err
			}
			name := UniqueName(SafeName(f.Name), taken)
			if err := ws.create(ctx, name, tmp, n); err != nil {
				return SavedAttachment{}, err
			}
			taken[name] = true
			s := SavedAttachment{Name: f.Name, Path: session.AttachmentsDir + "/" + name, Size: n, MimeType: mimeOf(f.MimeType, ct, head[:k])}
			if lim.VisionMaxBytes > 0 && VisionImage(s.MimeType) && n <= lim.VisionMaxBytes && a.Store != nil {
				img, err := a.storeImage(ctx, req.Handle.SessionID, tmp, s)
				if err != nil {
					a.log().Warn("attachment: storing the image for the model failed; the file is in the workspace", "path", s.Path, "err", err)
				} else {
					s.Image = img
				}
			}
			return s, nil
		}()
		switch {
		case ferr != nil && IsTooLarge(ferr):
			refuse(n, "it is more than %s (SANDBOT_ATTACH_MAX_FILE_BYTES, SANDBOT_ATTACH_MAX_TOTAL_BYTES)", FormatBytes(max))
		case ferr != nil:
			refuse(f.Size, "it could not be downloaded: %s", a.scrubText(ferr.Error()))
		case serr != nil:
			refuse(f.Size, "it could not be saved into the workspace: %s", a.scrubText(serr.Error()))
		default:
			total += saved.Size
			res.Saved = append(res.Saved, saved)
		}
	}
	return res, nil
}

func (a *Activities) scrubText(s string) string {
	if a.Redactor == nil {
		return s
	}
	return a.Redactor.Redact(s)
}

// ErrAttachmentTooLarge is what a Fetcher returns (wrapped) for a file
// that passed its byte limit.
var ErrAttachmentTooLarge = errors.New("attachment larger than allowed")

// IsTooLarge reports whether a Fetcher's error says the file passed its
// limit.
func IsTooLarge(err error) bool { return errors.Is(err, ErrAttachmentTooLarge) }

// storeImage puts an image into the snapshot store under the session's
// prefix (deleted with the session), named by its digest.
func (a *Activities) storeImage(ctx context.Context, sessionID string, f *os.File, s SavedAttachment) (*session.ImageRef, error) {
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return nil, err
	}
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return nil, err
	}
	key := ImageKey(sessionID, hex.EncodeToString(h.Sum(nil)))
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return nil, err
	}
	if _, err := a.Store.Put(ctx, key, f); err != nil {
		return nil, err
	}
	return &session.ImageRef{Key: key, MimeType: s.MimeType, Path: s.Path, Bytes: s.Size}, nil
}

// ImageKey is where an attached image is kept for the model.
func ImageKey(sessionID, digest string) string {
	return SessionPrefix(sessionID) + "attachments/" + digest
}

// VisionImage reports whether a type is one vision models take.
func VisionImage(mimeType string) bool {
	switch mimeType {
	case "image/png", "image/jpeg", "image/gif", "image/webp":
		return true
	}
	return false
}

// mimeOf is the file's type: what its bytes are when they say (an image is
// an image only if it looks like one), else what the platform claimed.
func mimeOf(claimed, served string, head []byte) string {
	sniffed := http.DetectContentType(head)
	if strings.HasPrefix(sniffed, "image/") {
		return sniffed
	}
	for _, t := range []string{claimed, served} {
		if t != "" && t != "application/octet-stream" && !VisionImage(t) {
			return t
		}
	}
	if i := strings.IndexByte(sniffed, ';'); i >= 0 {
		sniffed = sniffed[:i]
	}
	return sniffed
}

// maxNameBytes bounds a saved file's name.
const maxNameBytes = 100

// SafeName turns a chat file name into one safe to create in
// attachments/: the last path element only, no control, format or bidi
// characters, none of the characters shells and file systems treat
// specially, not hidden and not starting with "-", at most 100 bytes
// (extension kept), and never empty, "." or "..".
func SafeName(name string) string {
	if i := strings.LastIndexAny(name, `/\`); i >= 0 {
		name = name[i+1:]
	}
	var b strings.Builder
	for _, r := range strings.ToValidUTF8(name, "_") {
		switch {
		case unicode.IsControl(r) || unicode.Is(unicode.Cf, r) || r == utf8.RuneError:
			b.WriteRune('_')
		case strings.ContainsRune(`:*?"<>|'$`+"`"+`;&!{}[]()#~%^=`, r):
			b.WriteRune('_')
		case unicode.IsSpace(r):
			b.WriteRune(' ')
		default:
			b.WriteRune(r)
		}
	}
	name = strings.Trim(b.String(), " .")
	name = strings.TrimLeft(name, "-")
	if name == "" {
		name = "file"
	}
	if len(name) > maxNameBytes {
		ext := path.Ext(name)
		if len(ext) > 16 || !utf8.ValidString(ext) {
			ext = ""
		}
		stem := name[:maxNameBytes-len(ext)]
		for !utf8.ValidString(stem) {
			stem = stem[:len(stem)-1]
		}
		name = strings.TrimRight(stem, " .") + ext
	}
	return name
}

// UniqueName returns name, or name-2, name-3… (before the extension),
// whichever is not taken.
func UniqueName(name string, taken map[string]bool) string {
	if !taken[name] {
		return name
	}
	ext := path.Ext(name)
	stem := strings.TrimSuffix(name, ext)
	for i := 2; ; i++ {
		if c := stem + "-" + strconv.Itoa(i) + ext; !taken[c] {
			return c
		}
	}
}

// workspaceFiles is how the activities reach a workspace's files.
type workspaceFiles interface {
	// names lists the entries of attachments/ (none if it is missing).
	names(ctx context.Context) (map[string]bool, error)
	// create writes a new file attachments/<name> of size bytes from r,
	// never replacing an entry.
	create(ctx context.Context, name string, r io.Reader, size int64) error
	// read returns the regular file at rel (workspace-relative, clean),
	// up to max bytes; a larger file fails with errFileTooLarge.
	read(ctx context.Context, rel string, max int64) ([]byte, error)
}

func (a *Activities) workspaceFiles(b Backend, h Handle) (workspaceFiles, error) {
	if t, ok := b.(Tree); ok {
		dir, _, err := t.TreeDirs(h)
		if err != nil {
			return nil, classify("workspace", err)
		}
		return treeFiles{dir: dir}, nil
	}
	return execFiles{b: b, h: h}, nil
}

// fileRefused is an error the model reads as the tool's answer.
func fileRefused(format string, args ...any) error {
	return FileRefusedError(fmt.Sprintf(format, args...))
}

// FileRefusedError is ReadFile's refusal, with msg for the model.
func FileRefusedError(msg string) error {
	return temporal.NewNonRetryableApplicationError(msg, ErrTypeFileRefused, nil)
}

// errFileTooLarge reports the size of a file over its read limit.
type errFileTooLarge struct{ size int64 }

func (e errFileTooLarge) Error() string { return fmt.Sprintf("file is %d bytes", e.size) }

// treeFiles reaches a host workspace directory through os.Root: no path,
// and no symlink anywhere in one, can lead outside it.
type treeFiles struct{ dir string }

func (t treeFiles) attachmentsDir(create bool) (*os.Root, error) {
	root, err := os.OpenRoot(t.dir)
	if err != nil {
		return nil, err
	}
	defer func() { _ = root.Close() }()
	st, err := root.Lstat(session.AttachmentsDir)
	switch {
	case errors.Is(err, fs.ErrNotExist) && create:
		if err := root.Mkdir(session.AttachmentsDir, 0o755); err != nil {
			return nil, err
		}
	case err != nil:
		return nil, err
	case !st.IsDir():
		// A symlink (or file) in its place: attachments go into the
		// directory itself, nowhere it points.
		return nil, fmt.Errorf("%s in the workspace is not a directory (%s); move it away to receive attachments", session.AttachmentsDir, st.Mode().Type())
	}
	return root.OpenRoot(session.AttachmentsDir)
}

func (t treeFiles) names(context.Context) (map[string]bool, error) {
	out := map[string]bool{}
	dir, err := t.attachmentsDir(false)
	if errors.Is(err, fs.ErrNotExist) {
		return out, nil
	}
	if err != nil {
		return nil, err
	}
	defer func() { _ = dir.Close() }()
	f, err := dir.Open(".")
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	ents, err := f.ReadDir(-1)
	if err != nil {
		return nil, err
	}
	for _, e := range ents {
		out[e.Name()] = true
	}
	return out, nil
}

func (t treeFiles) create(_ context.Context, name string, r io.Reader, _ int64) error {
	dir, err := t.attachmentsDir(true)
	if err != nil {
		return err
	}
	defer func() { _ = dir.Close() }()
	f, err := dir.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, r); err != nil {
		_ = f.Close()
		_ = dir.Remove(name)
		return err
	}
	return f.Close()
}

func (t treeFiles) read(_ context.Context, rel string, max int64) ([]byte, error) {
	root, err := os.OpenRoot(t.dir)
	if err != nil {
		return nil, err
	}
	defer func() { _ = root.Close() }()
	// Non-blocking, so a FIFO swapped in after the check cannot hang the
	// worker; the type is checked on the opened file.
	f, err := root.OpenFile(rel, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if st.IsDir() {
		return nil, errIsDir
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("not a regular file (%s)", st.Mode().Type())
	}
	if st.Size() > max {
		return nil, errFileTooLarge{st.Size()}
	}
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > max {
		return nil, errFileTooLarge{int64(len(data))}
	}
	return data, nil
}

var errIsDir = errors.New("is a directory")

// execFiles reaches a workspace through commands in the sandbox, for
// backends whose workspace the worker cannot open (containers, cloud
// sandboxes). Bytes go in base64 chunks small enough for one argument.
type execFiles struct {
	b Backend
	h Handle
}

// execChunk is how many bytes one command writes (their base64 stays well
// under Linux's 128 KiB limit on one argument).
const execChunk = 64 << 10

func (e execFiles) run(ctx context.Context, script string, outCap int) (Result, error) {
	return e.b.Exec(ctx, e.h, Cmd{Command: script, Timeout: fileCmdTimeout, OutputCap: outCap})
}

const fileCmdTimeout = time.Minute

func (e execFiles) names(ctx context.Context) (map[string]bool, error) {
	d := session.AttachmentsDir
	res, err := e.run(ctx, `if [ -L `+d+` ] || { [ -e `+d+` ] && [ ! -d `+d+` ]; }; then echo "`+d+` is not a directory; move it away to receive attachments" >&2; exit 3; fi; [ -d `+d+` ] || exit 0; cd `+d+` && for f in * .*; do [ -e "$f" ] || [ -L "$f" ] && printf '%s\0' "$f"; done`, 1<<20)
	if err != nil {
		return nil, err
	}
	if res.ExitCode != 0 {
		return nil, errors.New(strings.TrimSpace(res.Stderr))
	}
	out := map[string]bool{}
	for _, n := range strings.Split(res.Stdout, "\x00") {
		if n != "" {
			out[n] = true
		}
	}
	return out, nil
}

func (e execFiles) create(ctx context.Context, name string, r io.Reader, _ int64) error {
	target := ShellQuote(session.AttachmentsDir + "/" + name)
	d := session.AttachmentsDir
	res, err := e.run(ctx, `[ -L `+d+` ] && exit 3; mkdir -p `+d+` && set -C && : > `+target, 4096)
	if err != nil {
		return err
	}
	if res.ExitCode != 0 {
		return fmt.Errorf("create %s: exit %d %s", name, res.ExitCode, strings.TrimSpace(res.Stderr))
	}
	buf := make([]byte, execChunk)
	for {
		n, rerr := io.ReadFull(r, buf)
		if n > 0 {
			chunk := base64.StdEncoding.EncodeToString(buf[:n])
			res, err := e.run(ctx, `[ -L `+target+` ] && exit 3; printf %s '`+chunk+`' | base64 -d >> `+target, 4096)
			if err != nil {
				return err
			}
			if res.ExitCode != 0 {
				return fmt.Errorf("write %s: exit %d %s", name, res.ExitCode, strings.TrimSpace(res.Stderr))
			}
		}
		if rerr == io.EOF || rerr == io.ErrUnexpectedEOF {
			return nil
		}
		if rerr != nil {
			return rerr
		}
	}
}

func (e execFiles) read(ctx context.Context, rel string, max int64) ([]byte, error) {
	p := ShellQuote(rel)
	script := `p=` + p + `; r=$(realpath -m -- "$p" 2>/dev/null) || { echo missing; exit 0; }; w=$(pwd -P)
case "$r" in "$w"/*) ;; *) echo outside; exit 0;; esac
[ -e "$r" ] || { echo missing; exit 0; }
[ -d "$r" ] && { echo dir; exit 0; }; [ -f "$r" ] || { echo special; exit 0; }
s=$(stat -c %s -- "$r"); [ "$s" -le ` + strconv.FormatInt(max, 10) + ` ] || { echo "big $s"; exit 0; }
echo ok; base64 -w0 -- "$r"`
	res, err := e.run(ctx, script, int(max*4/3)+4096)
	if err != nil {
		return nil, err
	}
	status, body, _ := strings.Cut(res.Stdout, "\n")
	switch {
	case status == "missing":
		return nil, fs.ErrNotExist
	case status == "outside":
		return nil, errors.New("path escapes from parent")
	case status == "dir":
		return nil, errIsDir
	case status == "special":
		return nil, errors.New("not a regular file")
	case strings.HasPrefix(status, "big "):
		n, _ := strconv.ParseInt(strings.TrimPrefix(status, "big "), 10, 64)
		return nil, errFileTooLarge{n}
	case status != "ok" || res.ExitCode != 0 || res.Truncated:
		return nil, fmt.Errorf("reading the file failed (exit %d): %s", res.ExitCode, strings.TrimSpace(res.Stderr))
	}
	data, err := base64.StdEncoding.DecodeString(strings.TrimSpace(body))
	if err != nil {
		return nil, fmt.Errorf("reading the file failed: %w", err)
	}
	if int64(len(data)) > max {
		return nil, errFileTooLarge{int64(len(data))}
	}
	return data, nil
}

// ReadFileRequest is the input of ReadFile.
type ReadFileRequest struct {
	Handle Handle `json:"handle"`
	// Path is what the model asked for: relative to the workspace root,
	// or absolute under Handle.Workdir.
	Path string `json:"path"`
	// MaxBytes is the largest file that may be read; 0 takes the worker's
	// SANDBOT_SHARE_MAX_BYTES.
	MaxBytes int64 `json:"max_bytes"`
}

// ReadFileResult is a file read for sharing.
type ReadFileResult struct {
	// Path is the file's clean workspace-relative path; Name its base.
	Path     string `json:"path"`
	Name     string `json:"name"`
	Size     int64  `json:"size"`
	MimeType string `json:"mime_type"`
	Data     []byte `json:"data"`
}

// WorkspacePath resolves a path the model gave against the workspace
// root: relative paths as they are, absolute ones only under workdir. It
// refuses paths that leave the workspace by "..", and the root itself.
func WorkspacePath(p, workdir string) (string, error) {
	if strings.TrimSpace(p) == "" {
		return "", errors.New(`"path" is empty; give a file's path relative to the workspace root`)
	}
	if strings.IndexByte(p, 0) >= 0 {
		return "", errors.New(`"path" contains a NUL byte`)
	}
	if path.IsAbs(p) {
		wd := path.Clean(workdir)
		rel, ok := strings.CutPrefix(path.Clean(p), wd+"/")
		if workdir == "" || !ok {
			return "", fmt.Errorf("%q is outside the workspace; give a path relative to the workspace root (the current directory of your commands)", p)
		}
		p = rel
	}
	clean := path.Clean(p)
	if clean == "." {
		return "", fmt.Errorf("%q is the workspace itself; share_file takes one file", p)
	}
	if clean == ".." || strings.HasPrefix(clean, "../") {
		return "", fmt.Errorf("%q is outside the workspace; only files in the workspace can be shared", p)
	}
	return clean, nil
}

// ReadFile reads one workspace file for the share_file tool, at most
// MaxBytes. Paths outside the workspace, symlinks that lead out of it,
// directories, special files, files over the cap and files that hold one
// of the worker's secrets are refused with ErrTypeFileRefused, in words
// for the model. It runs on the handle's task queue.
func (a *Activities) ReadFile(ctx context.Context, req ReadFileRequest) (res ReadFileResult, err error) {
	defer func() { err = RedactError(a.Redactor, err) }()
	rel, err := WorkspacePath(req.Path, req.Handle.Workdir)
	if err != nil {
		return res, fileRefused("%s", err.Error())
	}
	b, err := a.backend(req.Handle.Backend)
	if err != nil {
		return res, err
	}
	ws, err := a.workspaceFiles(b, req.Handle)
	if err != nil {
		return res, err
	}
	if req.MaxBytes <= 0 {
		req.MaxBytes = a.ShareMaxBytes
	}
	if req.MaxBytes <= 0 || req.MaxBytes > session.MaxShareBytesCeiling {
		req.MaxBytes = DefaultShareMaxBytes
	}
	data, err := ws.read(ctx, rel, req.MaxBytes)
	var big errFileTooLarge
	switch {
	case err == nil:
	case errors.As(err, &big):
		return res, fileRefused("%s is %s; files shared to the chat may be at most %s (SANDBOT_SHARE_MAX_BYTES)", rel, FormatBytes(big.size), FormatBytes(req.MaxBytes))
	case errors.Is(err, errIsDir):
		return res, fileRefused("%s is a directory; share_file takes one file (archive the directory first, e.g. tar czf out.tgz dir)", rel)
	case errors.Is(err, fs.ErrNotExist):
		return res, fileRefused("%s does not exist in the workspace", rel)
	case strings.Contains(err.Error(), "escapes from parent") || strings.Contains(err.Error(), "path escapes"):
		return res, fileRefused("%s leads outside the workspace (a symlink?); only files in the workspace can be shared", rel)
	case strings.Contains(err.Error(), "not a regular file"):
		return res, fileRefused("%s is not a regular file; share_file takes a regular file", rel)
	default:
		if errors.Is(err, ErrNotFound) {
			return res, classify("read file", err)
		}
		return res, fileRefused("%s could not be read: %s", rel, err.Error())
	}
	if a.Redactor != nil && a.Redactor.Redact(string(data)) != string(data) {
		return res, fileRefused("%s contains a secret this worker holds; it was not shared", rel)
	}
	head := data[:min(len(data), 512)]
	return ReadFileResult{Path: rel, Name: path.Base(rel), Size: int64(len(data)), MimeType: mimeOf(mimeByExt(rel), "", head), Data: data}, nil
}

// mimeByExt names a few common types by extension (sniffing cannot tell
// text formats apart).
func mimeByExt(p string) string {
	switch strings.ToLower(path.Ext(p)) {
	case ".md":
		return "text/markdown"
	case ".csv":
		return "text/csv"
	case ".json":
		return "application/json"
	case ".svg":
		return "image/svg+xml"
	case ".pdf":
		return "application/pdf"
	case ".txt", ".log":
		return "text/plain"
	case ".html":
		return "text/html"
	case ".zip":
		return "application/zip"
	}
	return ""
}

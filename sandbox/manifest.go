package sandbox

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/klauspost/compress/zstd"
)

// Incremental snapshots (docs/ARCHITECTURE.md, "Workspace snapshots").
//
// A snapshot is a manifest: the list of the workspace's entries, each
// regular file naming its content by SHA-256. The contents are objects
// shared by every snapshot of every session of the deployment:
//
//	objects/<first two hex digits>/<sha256 hex>
//
// so a turn that changed one file writes one object and a manifest, a fork
// copies a manifest and no data, and a session keeps one manifest per
// completed turn (its checkpoints) at the cost of what changed. Manifests
// live under the same keys full tar snapshots did (sandbox.SnapshotKey),
// and readers tell the two apart by their first bytes, so snapshots written
// before incremental ones still restore.

// ObjectsPrefix is the store prefix of workspace content objects.
const ObjectsPrefix = "objects/"

// ObjectKey is the store key of the object holding content with the given
// SHA-256 (hex).
func ObjectKey(hash string) string {
	return ObjectsPrefix + hash[:2] + "/" + hash
}

// objectHashOfKey is ObjectKey's inverse ("" for a key it cannot have made).
func objectHashOfKey(key string) string {
	rest, ok := strings.CutPrefix(key, ObjectsPrefix)
	if !ok || len(rest) != 3+64 || rest[2] != '/' || rest[:2] != rest[3:5] || !isHash(rest[3:]) {
		return ""
	}
	return rest[3:]
}

func isHash(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// manifestMagic opens every stored manifest. It cannot open a tar (whose
// first byte is a name, never NUL), a zstd or a gzip stream.
var manifestMagic = []byte("\x00sandbot-manifest\n")

// manifestVersion is the format of the lines inside a manifest.
const manifestVersion = "v2"

// Entry types in a manifest.
const (
	EntryDir      = 'd'
	EntryFile     = 'f'
	EntrySymlink  = 'l'
	EntryHardlink = 'h' // Link names an earlier file entry
)

// ManifestEntry is one entry of a workspace.
type ManifestEntry struct {
	// Path is slash-separated and relative to the workspace root, without
	// a leading "./" or a trailing "/".
	Path string
	// Mode is the permission bits and the sticky bit (0o1777).
	Mode uint32
	Type byte
	// reused says the snapshot being taken copied Hash and Location from
	// its base, so they need not be looked up again (not stored). Beside
	// Type and Mode, as the fields' order keeps an entry at 120 bytes: a
	// worker holds one per file of the workspaces it snapshots.
	reused bool
	// Size is a file's length.
	Size int64
	// MTime is the modification time in nanoseconds since the epoch.
	MTime int64
	// Hash is a file's content SHA-256 (hex).
	Hash string
	// Location is where a file's content is stored.
	Location
	// Link is a symlink's target or a hard link's earlier entry.
	Link string
	// Stat is the backend's change key for the entry as it was read (inode
	// and change time): a later snapshot on the same host may reuse Hash
	// without reading a file whose Stat, size and mtime are unchanged.
	// Empty when unknown, or when the entry changed so close to the
	// snapshot that it could change again unseen (see racyWindow).
	Stat string
}

// Manifest is a snapshot: the workspace's entries, parents before
// children, in byte order of their paths.
type Manifest struct {
	Entries []ManifestEntry
	// stored lists the parts it was read from.
	stored []partRef
	// byPath indexes the files with a stat key, built once (a manifest
	// is not changed once stored).
	indexOnce sync.Once
	byPath    map[string]*ManifestEntry
	// byHash is where each content of the manifest is stored, and each
	// part of it, built once: pointers into Entries and stored, half the
	// size of the Locations themselves in every slot of the map.
	hashOnce sync.Once
	byHash   map[string]*Location
}

// hashIndex returns where the manifest's contents and parts are stored,
// by hash: what a snapshot taken from it need not store again. Callers
// must not modify the Locations.
func (m *Manifest) hashIndex() map[string]*Location {
	m.hashOnce.Do(func() {
		m.byHash = make(map[string]*Location, len(m.Entries)+len(m.stored))
		for i := range m.stored {
			m.byHash[m.stored[i].hash] = &m.stored[i].Location
		}
		for i := range m.Entries {
			if e := &m.Entries[i]; e.Type == EntryFile {
				m.byHash[e.Hash] = &e.Location
			}
		}
	})
	return m.byHash
}

// index builds the manifest's indexes. A stored manifest is the next
// snapshot's base: building them between turns keeps them off that
// snapshot's clock.
func (m *Manifest) index() {
	m.statIndex()
	m.hashIndex()
}

// statIndex returns the files that have a stat key, by path.
func (m *Manifest) statIndex() map[string]*ManifestEntry {
	m.indexOnce.Do(func() {
		m.byPath = make(map[string]*ManifestEntry, len(m.Entries))
		for i := range m.Entries {
			if e := &m.Entries[i]; e.Type == EntryFile && e.Stat != "" {
				m.byPath[e.Path] = e
			}
		}
	})
	return m.byPath
}

// IsManifest reports whether a stored snapshot starting with head is a
// manifest (head needs len(manifestMagic) bytes).
func IsManifest(head []byte) bool { return bytes.HasPrefix(head, manifestMagic) }

// Files reports the number of regular files and their total size.
func (m *Manifest) Files() (n int, bytes int64) {
	for _, e := range m.Entries {
		if e.Type == EntryFile {
			n++
			bytes += e.Size
		}
	}
	return n, bytes
}

// A stored manifest is small whatever the workspace: its entries are cut
// into parts at content-defined boundaries (after an entry whose path
// hashes to 0 modulo partSpread, so a boundary depends on that path only
// and an added or removed file moves none of the others), each part is an
// object like any file content, and the manifest itself lists the parts:
//
//	<manifestMagic> zstd(
//	v2
//	p <part sha256> <part bytes> <entries> <pack|-> <offset> <stored>
//	...)
//
// A part holds one line per entry:
//
//	<type> <mode octal> <size> <mtime ns> <hash|-> <pack|-> <offset> <stored> <stat|-> <quoted path> [<quoted link>]
//
// Paths are Go-quoted, so any byte a file name can hold survives. A turn
// that changes one file writes that file's object, one part and the list.

// partSpread is the mean number of entries per part.
const partSpread = 64

// maxPartEntries forces a boundary, bounding a part whatever its paths.
const maxPartEntries = 4 * partSpread

// partRef is a manifest's part as listed.
type partRef struct {
	hash    string
	size    int64
	entries int
	Location
}

// parts cuts the entries into parts.
func (m *Manifest) parts() [][]ManifestEntry {
	var out [][]ManifestEntry
	start := 0
	for i := range m.Entries {
		if i+1-start >= maxPartEntries || boundary(m.Entries[i].Path) || i == len(m.Entries)-1 {
			out = append(out, m.Entries[start:i+1])
			start = i + 1
		}
	}
	return out
}

func boundary(p string) bool {
	h := uint32(2166136261) // FNV-1a
	for i := 0; i < len(p); i++ {
		h ^= uint32(p[i])
		h *= 16777619
	}
	return h%partSpread == 0
}

func encodePart(entries []ManifestEntry) []byte {
	b := make([]byte, 0, len(entries)*128)
	for i := range entries {
		b = entries[i].appendLine(b)
	}
	return b
}

// encodeList writes the stored form of a manifest listing refs.
func encodeList(w io.Writer, refs []partRef) error {
	b := make([]byte, 0, 32+len(refs)*100)
	b = append(b, manifestVersion+"\n"...)
	for _, r := range refs {
		b = fmt.Appendf(b, "p %s %d %d %s %d %d\n", r.hash, r.size, r.entries, orDash(r.Pack), r.Offset, r.Stored)
	}
	// One frame from the shared encoder: a list is small, and a new
	// streaming encoder costs more than the list.
	out := objectEncoder.EncodeAll(b, append(make([]byte, 0, len(manifestMagic)+len(b)/2+64), manifestMagic...))
	_, err := w.Write(out)
	return err
}

// decodeList reads a stored manifest's list of parts.
func decodeList(r io.Reader) ([]partRef, error) {
	magic := make([]byte, len(manifestMagic))
	if _, err := io.ReadFull(r, magic); err != nil || !IsManifest(magic) {
		return nil, fmt.Errorf("%w: no manifest header", ErrBadManifest)
	}
	dec, err := zstd.NewReader(r, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxWindow(maxDecoderWindow))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadManifest, err)
	}
	defer dec.Close()
	sc := bufio.NewScanner(dec)
	if !sc.Scan() || sc.Text() != manifestVersion {
		if err := sc.Err(); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrBadManifest, err)
		}
		return nil, fmt.Errorf("%w: unknown version (this worker reads %s)", ErrBadManifest, manifestVersion)
	}
	var refs []partRef
	for n := 2; sc.Scan(); n++ {
		f := strings.Fields(sc.Text())
		if len(f) != 7 || f[0] != "p" || !isHash(f[1]) {
			return nil, fmt.Errorf("%w: line %d is not a part", ErrBadManifest, n)
		}
		size, err1 := strconv.ParseInt(f[2], 10, 64)
		count, err2 := strconv.Atoi(f[3])
		if err1 != nil || err2 != nil || size < 0 || size > maxPartBytes || count <= 0 || count > maxPartEntries {
			return nil, fmt.Errorf("%w: line %d has a bad size or count", ErrBadManifest, n)
		}
		loc, err := parseLocation(f[4], f[5], f[6])
		if err != nil {
			return nil, fmt.Errorf("%w: line %d: %v", ErrBadManifest, n, err)
		}
		refs = append(refs, partRef{hash: f[1], size: size, entries: count, Location: loc})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadManifest, err)
	}
	return refs, nil
}

// maxPartBytes bounds a part (maxPartEntries lines of at most
// maxManifestLine bytes).
const maxPartBytes = maxPartEntries * maxManifestLine

// Fingerprint is a digest of a stored manifest's parts (empty for one
// not stored): two manifests with equal fingerprints hold the same
// entries, stat keys included, so an entry whose stat key was left out as
// racy makes the next one differ.
func (m *Manifest) Fingerprint() string {
	if m.stored == nil {
		return ""
	}
	sum := sha256.New()
	for _, p := range m.stored {
		sum.Write([]byte(p.hash))
	}
	return "m2:" + hex.EncodeToString(sum.Sum(nil)[:20])
}

// sameEntries reports whether two entries are equal in everything a
// snapshot records.
func sameEntries(a, b []ManifestEntry) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := a[i], b[i]
		x.reused, y.reused = false, false
		if x != y {
			return false
		}
	}
	return true
}

// storedParts returns a stored manifest's parts with their entries, by the
// path of each part's first entry.
func (m *Manifest) storedParts() map[string]storedPart {
	out := make(map[string]storedPart, len(m.stored))
	at := 0
	for _, ref := range m.stored {
		if at+ref.entries > len(m.Entries) {
			return out
		}
		p := m.Entries[at : at+ref.entries]
		out[p[0].Path] = storedPart{ref: ref, entries: p}
		at += ref.entries
	}
	return out
}

type storedPart struct {
	ref     partRef
	entries []ManifestEntry
}

func (e *ManifestEntry) appendLine(b []byte) []byte { return e.appendTo(b, true) }

// appendTo writes the entry's line; without the location it names the
// entry's content, not where it is stored (for Fingerprint).
func (e *ManifestEntry) appendTo(b []byte, withLocation bool) []byte {
	b = append(b, e.Type, ' ')
	b = strconv.AppendUint(b, uint64(e.Mode), 8)
	b = append(b, ' ')
	b = strconv.AppendInt(b, e.Size, 10)
	b = append(b, ' ')
	b = strconv.AppendInt(b, e.MTime, 10)
	b = append(b, ' ')
	b = appendField(b, e.Hash)
	b = append(b, ' ')
	if withLocation {
		b = appendField(b, e.Pack)
		b = append(b, ' ')
		b = strconv.AppendInt(b, e.Offset, 10)
		b = append(b, ' ')
		b = strconv.AppendInt(b, e.Stored, 10)
		b = append(b, ' ')
	}
	b = appendField(b, e.Stat)
	b = append(b, ' ')
	b = strconv.AppendQuote(b, e.Path)
	if e.Type == EntrySymlink || e.Type == EntryHardlink {
		b = append(b, ' ')
		b = strconv.AppendQuote(b, e.Link)
	}
	return append(b, '\n')
}

func appendField(b []byte, s string) []byte { return append(b, orDash(s)...) }

// ErrBadManifest is returned (wrapped) for a manifest that cannot be read.
var ErrBadManifest = errors.New("bad snapshot manifest")

// maxManifestLine bounds one line (a path is at most 4096 bytes on Linux;
// quoting can quadruple it).
const maxManifestLine = 64 << 10

// parsePart reads a part's lines, checking every entry as a restore
// would: paths that could leave the workspace, hashes that are not
// SHA-256 and unknown types are refused (hard links are checked across
// the whole manifest by checkLinks).
//
// The entries keep their own strings, not the line they were read from:
// parts are cached (partsCache), and an entry holding its line's 200-odd
// bytes for the sake of a 64-byte hash made a worker's cached parts a
// third larger. A pack's name, shared by the entries stored in it, is kept
// once.
func parsePart(data []byte) ([]ManifestEntry, error) {
	out := make([]ManifestEntry, 0, bytes.Count(data, []byte{'\n'}))
	pack := ""
	for n := 1; len(data) > 0; n++ {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			return nil, fmt.Errorf("%w: line %d is not terminated", ErrBadManifest, n)
		}
		e, err := parseManifestLine(string(data[:i]))
		data = data[i+1:]
		if err != nil {
			return nil, fmt.Errorf("%w: line %d: %v", ErrBadManifest, n, err)
		}
		e.Path, e.Link = strings.Clone(e.Path), strings.Clone(e.Link) // Unquote returns a window on the line when it can
		e.Hash, e.Stat = strings.Clone(e.Hash), strings.Clone(e.Stat)
		if e.Pack != pack {
			pack = strings.Clone(e.Pack)
		}
		e.Pack = pack
		out = append(out, e)
	}
	return out, nil
}

// checkLinks refuses a hard link to anything but an earlier file.
func checkLinks(entries []ManifestEntry) error {
	if !slices.ContainsFunc(entries, func(e ManifestEntry) bool { return e.Type == EntryHardlink }) {
		return nil
	}
	seen := make(map[string]byte, len(entries))
	for _, e := range entries {
		if e.Type == EntryHardlink && seen[e.Link] != EntryFile {
			return fmt.Errorf("%w: hard link %q to %q, which is not an earlier file", ErrBadManifest, e.Path, e.Link)
		}
		seen[e.Path] = e.Type
	}
	return nil
}

func parseManifestLine(line string) (ManifestEntry, error) {
	var e ManifestEntry
	f := strings.SplitN(line, " ", 10)
	if len(f) != 10 || len(f[0]) != 1 {
		return e, errors.New("want 10 fields")
	}
	loc, err := parseLocation(f[5], f[6], f[7])
	if err != nil {
		return e, err
	}
	e.Location = loc
	f = append(f[:5], f[8:]...)
	e.Type = f[0][0]
	switch e.Type {
	case EntryDir, EntryFile, EntrySymlink, EntryHardlink:
	default:
		return e, fmt.Errorf("unknown entry type %q", f[0])
	}
	mode, err := strconv.ParseUint(f[1], 8, 32)
	if err != nil || mode&^0o1777 != 0 {
		return e, fmt.Errorf("bad mode %q", f[1])
	}
	e.Mode = uint32(mode)
	if e.Size, err = strconv.ParseInt(f[2], 10, 64); err != nil || e.Size < 0 {
		return e, fmt.Errorf("bad size %q", f[2])
	}
	if e.MTime, err = strconv.ParseInt(f[3], 10, 64); err != nil {
		return e, fmt.Errorf("bad mtime %q", f[3])
	}
	if f[4] != "-" {
		e.Hash = f[4]
	}
	if f[5] != "-" {
		e.Stat = f[5]
	}
	if (e.Type == EntryFile) != (e.Hash != "") || e.Hash != "" && !isHash(e.Hash) {
		return e, fmt.Errorf("bad hash %q for a %q entry", f[4], f[0])
	}
	rest := f[6]
	p, err := strconv.QuotedPrefix(rest)
	if err != nil {
		return e, fmt.Errorf("bad path: %v", err)
	}
	if e.Path, err = strconv.Unquote(p); err != nil {
		return e, fmt.Errorf("bad path: %v", err)
	}
	rest = rest[len(p):]
	if e.Type == EntrySymlink || e.Type == EntryHardlink {
		l, ok := strings.CutPrefix(rest, " ")
		if !ok {
			return e, errors.New("link without a target")
		}
		if e.Link, err = strconv.Unquote(l); err != nil || e.Link == "" {
			return e, fmt.Errorf("bad link target %q", l)
		}
	} else if rest != "" {
		return e, errors.New("trailing data")
	}
	name, err := CheckArchiveName(e.Path)
	if err != nil || name != e.Path || name == "." {
		return e, fmt.Errorf("path %q is not a clean relative path inside the workspace", e.Path)
	}
	if e.Type == EntryHardlink {
		if _, err := CheckHardlinkTarget(e.Path, e.Link); err != nil {
			return e, err
		}
	}
	return e, nil
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// parseLocation reads a Location's three fields.
func parseLocation(pack, off, stored string) (Location, error) {
	var l Location
	if pack != "-" {
		if !isHash(pack) {
			return l, fmt.Errorf("bad pack %q", pack)
		}
		l.Pack = pack
	}
	var err1, err2 error
	l.Offset, err1 = strconv.ParseInt(off, 10, 64)
	l.Stored, err2 = strconv.ParseInt(stored, 10, 64)
	if err1 != nil || err2 != nil || l.Offset < 0 || l.Stored < 0 || l.Pack == "" && (l.Offset != 0 || l.Stored != 0) {
		return l, fmt.Errorf("bad location %s %s %s", pack, off, stored)
	}
	return l, nil
}

package session

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"
)

// Signature is the bot's proof that a request to a session workflow comes
// from it. The workflow trusts the User a request names — the owner
// approving, an approver rejecting — only because of this signature: a
// command in a sandbox that reaches the Temporal frontend can send an
// update, but cannot make one that verifies, since the key lives only in the
// bot's and the worker's configuration (SANDBOT_DECISION_KEY).
//
// The MAC covers the update name, the workflow ID, the time of signing and
// the request's meaningful fields (see signedFields), so a signature cannot
// be moved to another session, another update, another user or decision,
// and goes stale after SignatureMaxAge.
type Signature struct {
	At  time.Time `json:"at"`
	MAC string    `json:"mac"`
}

// SignatureMaxAge bounds how far a signature's time may be from the
// verifier's clock (either way, for clock skew between bot and worker).
const SignatureMaxAge = 10 * time.Minute

// MinKeyBytes is the shortest decision key accepted.
const MinKeyBytes = 32

// Signed is a request that carries the bot's signature.
type Signed interface {
	auth() *Signature
	signedFields() []string
}

// ErrUnsigned, ErrBadSignature and ErrStaleSignature are returned by Verify.
var (
	ErrUnsigned       = errors.New("the request is not signed by the sandbot bot")
	ErrBadSignature   = errors.New("the request's signature does not verify")
	ErrStaleSignature = errors.New("the request's signature is too old or from the future")
)

// Sign stamps req with a signature for update on workflow workflowID.
func Sign(key []byte, workflowID, update string, req Signed, at time.Time) {
	at = at.UTC().Round(0)
	*req.auth() = Signature{At: at, MAC: mac(key, workflowID, update, req, at)}
}

// Verify checks req's signature for update on workflowID at time now. It
// fails closed: an empty key verifies nothing.
func Verify(key []byte, workflowID, update string, req Signed, now time.Time) error {
	sig := *req.auth()
	if sig.MAC == "" {
		return ErrUnsigned
	}
	if len(key) < MinKeyBytes {
		return fmt.Errorf("%w: the worker has no decision key", ErrBadSignature)
	}
	if d := now.Sub(sig.At); d > SignatureMaxAge || d < -SignatureMaxAge {
		return ErrStaleSignature
	}
	want := mac(key, workflowID, update, req, sig.At.UTC())
	if !hmac.Equal([]byte(want), []byte(sig.MAC)) {
		return ErrBadSignature
	}
	return nil
}

func mac(key []byte, workflowID, update string, req Signed, at time.Time) string {
	h := hmac.New(sha256.New, key)
	put := func(s string) {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(s)))
		h.Write(n[:])
		h.Write([]byte(s))
	}
	put("sandbot-decision-v1")
	put(update)
	put(workflowID)
	put(at.Format(time.RFC3339Nano))
	for _, f := range req.signedFields() {
		put(f)
	}
	return base64.RawStdEncoding.EncodeToString(h.Sum(nil))
}

func userFields(u User) []string {
	roles := slices.Clone(u.Roles)
	slices.Sort(roles)
	return append([]string{u.ID, strconv.Itoa(len(roles))}, roles...)
}

func (r *MessageRequest) auth() *Signature { return &r.Auth }
func (r *MessageRequest) signedFields() []string {
	f := []string{r.EventID, r.Text}
	if r.Repo != nil {
		// Only when set, so messages of bots from before repositories
		// verify as they did.
		f = append(f, "repo:"+r.Repo.URL, r.Repo.Branch)
	}
	if r.Model != "" {
		f = append(f, "model:"+r.Model)
	}
	if r.Context != "" {
		f = append(f, "context:"+r.Context)
	}
	for _, a := range r.Attachments {
		f = append(f, "file:"+a.Platform, a.ID, a.Name, fmt.Sprint(a.Size), a.MimeType, a.URL)
	}
	return append(f, userFields(r.User)...)
}

func (r *ApproveRequest) auth() *Signature { return &r.Auth }
func (r *ApproveRequest) signedFields() []string {
	return append([]string{r.CallID, string(r.Decision), r.Reason}, userFields(r.User)...)
}

func (r *PauseRequest) auth() *Signature         { return &r.Auth }
func (r *PauseRequest) signedFields() []string   { return userFields(r.User) }
func (r *CompactRequest) auth() *Signature       { return &r.Auth }
func (r *CompactRequest) signedFields() []string { return userFields(r.User) }
func (r *ResumeRequest) auth() *Signature        { return &r.Auth }
func (r *ResumeRequest) signedFields() []string  { return userFields(r.User) }
func (r *StopRequest) auth() *Signature          { return &r.Auth }
func (r *StopRequest) signedFields() []string    { return userFields(r.User) }
func (r *DestroyRequest) auth() *Signature       { return &r.Auth }
func (r *DestroyRequest) signedFields() []string { return userFields(r.User) }
func (r *SetBackendRequest) auth() *Signature    { return &r.Auth }
func (r *ChatRefRequest) auth() *Signature       { return &r.Auth }
func (r *ClaimFinalRequest) auth() *Signature    { return &r.Auth }
func (r *ClaimWatchRequest) auth() *Signature    { return &r.Auth }
func (r *ForkRequest) auth() *Signature          { return &r.Auth }
func (r *SetBackendRequest) signedFields() []string {
	return append([]string{r.Backend}, userFields(r.User)...)
}
func (r *ForkRequest) signedFields() []string {
	f := []string{r.Location.ID(), r.Title, r.Backend}
	if r.AtTurn != 0 {
		// Only when set, so requests of bots from before /fork @N verify
		// as they did.
		f = append(f, "@"+strconv.Itoa(r.AtTurn))
	}
	return append(f, userFields(r.User)...)
}
func (r *RewindRequest) auth() *Signature { return &r.Auth }
func (r *RewindRequest) signedFields() []string {
	return append([]string{strconv.Itoa(r.Turn)}, userFields(r.User)...)
}
func (r *ChatRefRequest) signedFields() []string {
	return []string{strconv.Itoa(r.Turn), r.Kind, r.Ref}
}
func (r *ClaimFinalRequest) signedFields() []string {
	return []string{strconv.Itoa(r.Turn), r.Claimer}
}
func (r *ClaimWatchRequest) signedFields() []string {
	return []string{r.Claimer, r.For.String(), strconv.FormatBool(r.Release)}
}

// SignedRequest returns req as a Signed request when it is one of the
// session workflow's update requests (by value or pointer), for a verifier
// that sees decoded update arguments.
func SignedRequest(req any) (Signed, bool) {
	switch r := req.(type) {
	case Signed:
		return r, true
	case MessageRequest:
		return &r, true
	case ApproveRequest:
		return &r, true
	case PauseRequest:
		return &r, true
	case ResumeRequest:
		return &r, true
	case CompactRequest:
		return &r, true
	case StopRequest:
		return &r, true
	case DestroyRequest:
		return &r, true
	case SetBackendRequest:
		return &r, true
	case ForkRequest:
		return &r, true
	case RewindRequest:
		return &r, true
	case ChatRefRequest:
		return &r, true
	case ClaimFinalRequest:
		return &r, true
	case ClaimWatchRequest:
		return &r, true
	case SetRepoRequest:
		return &r, true
	case SetTitleRequest:
		return &r, true
	case SetModelRequest:
		return &r, true
	case DiffRequest:
		return &r, true
	case OpenPRRequest:
		return &r, true
	}
	return nil, false
}

func (r *SetTitleRequest) auth() *Signature { return &r.Auth }
func (r *SetTitleRequest) signedFields() []string {
	return append([]string{r.Title}, userFields(r.User)...)
}

func (r *SetModelRequest) auth() *Signature { return &r.Auth }
func (r *SetModelRequest) signedFields() []string {
	return append([]string{r.Model}, userFields(r.User)...)
}

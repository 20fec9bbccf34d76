package session

import "fmt"

// Files in: a chat message's attachments travel as descriptors (what the
// platform said about each file and where to fetch it); the worker
// downloads them into the workspace, outside the sandbox, with a
// credential the sandbox never sees. Files out: the share_file tool reads a
// workspace file on the worker, and the bot posts it to the thread.

// Attachment describes a file attached to a chat message, as the platform
// described it. The bot signs it into the MessageRequest; the worker
// fetches URL only from the platform's own file hosts.
type Attachment struct {
	// Platform is the platform whose file host serves URL ("slack",
	// "discord"); it decides which credential, if any, the download uses.
	Platform string `json:"platform"`
	// ID is the platform's file ID.
	ID   string `json:"id,omitempty"`
	Name string `json:"name"`
	// Size is the size the platform reported, in bytes.
	Size     int64  `json:"size"`
	MimeType string `json:"mime_type,omitempty"`
	// URL is where the file is downloaded from (Slack url_private_download,
	// a Discord CDN URL).
	URL string `json:"url"`
}

// Limits on attachment descriptors in one message. They bound what a
// message can add to history; the worker's caps on size and count
// (SANDBOT_ATTACH_*) decide what is downloaded.
const (
	MaxAttachments       = 20
	MaxAttachmentNameLen = 255
	MaxAttachmentURLLen  = 2048
	MaxAttachmentMimeLen = 128
)

// AttachmentBytes is what a descriptor counts against MaxMessageBytes: its
// text fields plus room for the line that tells the model about it.
func AttachmentBytes(a Attachment) int {
	return len(a.Platform) + len(a.ID) + len(a.Name) + len(a.MimeType) + len(a.URL) + AttachedLineOverhead
}

// AttachedLineOverhead bounds what the workflow adds to a user message per
// attachment beyond the file's name: its directory, type and size.
const AttachedLineOverhead = 160

// CheckAttachments validates a message's descriptors.
func CheckAttachments(atts []Attachment) error {
	if len(atts) > MaxAttachments {
		return fmt.Errorf("the message has %d attachments; at most %d are accepted per message", len(atts), MaxAttachments)
	}
	for i, a := range atts {
		switch {
		case len(a.URL) > MaxAttachmentURLLen:
			return fmt.Errorf("attachment %d (%q) has a URL of %d bytes; at most %d are accepted", i+1, a.Name, len(a.URL), MaxAttachmentURLLen)
		case len(a.Name) > MaxAttachmentNameLen:
			return fmt.Errorf("attachment %d has a name of %d bytes; at most %d are accepted", i+1, len(a.Name), MaxAttachmentNameLen)
		case len(a.MimeType) > MaxAttachmentMimeLen || len(a.ID) > MaxAttachmentNameLen || len(a.Platform) > 32:
			return fmt.Errorf("attachment %d (%q) has an oversized type or ID", i+1, a.Name)
		case a.Size < 0:
			return fmt.Errorf("attachment %d (%q) has a negative size", i+1, a.Name)
		}
	}
	return nil
}

// AttachmentsDir is the workspace directory attachments are saved in.
const AttachmentsDir = "attachments"

// ImageRef is an image attached to a user message for a vision model: the
// bytes are in the snapshot store under Key (never in workflow history),
// and the model activity sends them as an image part.
type ImageRef struct {
	Key      string `json:"key"`
	MimeType string `json:"mime_type"`
	// Path is the file's workspace path, for the note that replaces the
	// image when it is not sent again.
	Path  string `json:"path"`
	Bytes int64  `json:"bytes"`
}

// ShareFileToolName is the tool that posts a workspace file to the thread.
const ShareFileToolName = "share_file"

// ShareFileArgs are the typed arguments of the share_file tool.
type ShareFileArgs struct {
	Path string `json:"path"`
}

// SharedFile is a workspace file a share_file call put up for the thread
// (TurnState.Shared). The bot posts it once: the watcher fetches its bytes
// with QuerySharedFile and records the post with a chat_ref of kind
// ChatRefSharedFile, which sets Posted.
type SharedFile struct {
	CallID string `json:"call_id"`
	// Path is the file's path in the workspace; Name its base name.
	Path     string `json:"path"`
	Name     string `json:"name"`
	Size     int64  `json:"size"`
	MimeType string `json:"mime_type,omitempty"`
	Posted   bool   `json:"posted,omitempty"`
}

// QuerySharedFile answers a SharedFileRequest with the file's bytes.
const QuerySharedFile = "shared_file"

// SharedFileRequest is the argument of QuerySharedFile.
type SharedFileRequest struct {
	CallID string `json:"call_id"`
}

// SharedFileData is a shared file with its bytes. Gone is set when the
// session no longer holds them (posted already, or carried past a
// continue-as-new, which keeps no file bytes).
type SharedFileData struct {
	SharedFile
	Data []byte `json:"data,omitempty"`
	Gone bool   `json:"gone,omitempty"`
}

// ChatRefSharedFile is the ChatRefRequest kind that records, with the
// share_file call's ID as Ref, that its file was posted.
const ChatRefSharedFile = "shared_file"

// MaxShareBytesCeiling is the most SANDBOT_SHARE_MAX_BYTES may allow: the
// bytes travel from the worker to the bot through Temporal (an activity
// result and a query answer), whose payloads are limited to 2 MB.
const MaxShareBytesCeiling = 1 << 20

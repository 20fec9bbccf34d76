package repo

import (
	"encoding/base64"
	"encoding/hex"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// Fake secrets, assembled at run time so that no scanner flags this file.
var (
	fakeAWS      = "AKIA" + "IOSFODNN7EXAMPLE"
	fakeASIA     = "ASIA" + "Y3FAKEKEYID00042"
	fakeGHP      = "ghp_" + strings.Repeat("a1B2", 9)
	fakeGHS      = "ghs_" + strings.Repeat("Zz09", 9)
	fakePAT      = "github_pat_" + "11ABCDEFG0123456789_" + strings.Repeat("x", 59)
	fakeSlack    = "xoxb-" + "123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx"
	fakeHook     = "https://hooks.slack.com/services/" + "T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX"
	fakeOpenAI   = "sk-" + "abc123DEF456ghi789JKL012mno345PQR678stu901"
	fakeProj     = "sk-proj-" + "Ab1Cd2Ef3Gh4Ij5Kl6Mn7Op8Qr9St0"
	fakePEM      = "-----BEGIN " + "RSA PRIVATE KEY-----\nMIIEow...\n-----END RSA PRIVATE KEY-----\n"
	fakeOpenSSH  = "-----BEGIN " + "OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXk\n"
	fakeGoogle   = "AIza" + "SyD-1234567890abcdefghijklmnopqrstu"
	fakeStripe   = "sk_live_" + "4eC39HqLyjWDarjtT1zdp7dc"
	knownSecret  = "worker-model-key-7d1c0ffee"
	clean        = "package main\n\n// ask-for-a-task-name-that-is-long is not a key\nfunc main() { println(\"sk-learn\", \"AKIA\") }\n"
	cleanConfigs = "AKIAshort\nmy-ghp_thing\nxoxb-short\nbasket-of-skills-and-tools-for-you\n-----BEGIN PUBLIC KEY-----\n"
)

func TestScanSecretsRules(t *testing.T) {
	root := t.TempDir()
	cases := map[string]struct {
		text string
		rule string
	}{
		"aws.txt":       {"key = " + fakeAWS + "\n", "aws-access-key-id"},
		"asia.txt":      {"x\n\n" + fakeASIA, "aws-access-key-id"},
		"ghp.txt":       {"token: " + fakeGHP, "github-token"},
		"ghs.txt":       {"GH=" + fakeGHS, "github-token"},
		"pat.txt":       {fakePAT, "github-token"},
		"slack.txt":     {"SLACK=" + fakeSlack, "slack-token"},
		"hook.txt":      {"url: " + fakeHook, "slack-webhook"},
		"openai.txt":    {"OPENAI_API_KEY=" + fakeOpenAI, "openai-api-key"},
		"proj.txt":      {`{"key":"` + fakeProj + `"}`, "openai-api-key"},
		"pem.txt":       {fakePEM, "private-key"},
		"openssh.txt":   {fakeOpenSSH, "private-key"},
		"google.txt":    {"maps=" + fakeGoogle, "google-api-key"},
		"stripe.txt":    {"stripe " + fakeStripe, "stripe-live-key"},
		"clean.go":      {clean, ""},
		"configs.txt":   {cleanConfigs, ""},
		"longaws.txt":   {fakeAWS + "MORE", ""}, // 24 characters: not a key ID
		"inword.txt":    {"X" + fakeAWS, ""},
		"testkey.txt":   {"sk_test_" + "4eC39HqLyjWDarjtT1zdp7dc", ""},
		"kebab-sk.txt":  {"task-" + "runner-configuration-for-everyone", ""},
		"emptyfile.txt": {"", ""},
	}
	var paths []string
	for p, c := range cases {
		writeFiles(t, root, map[string]string{p: c.text})
		paths = append(paths, p)
	}
	slices.Sort(paths)
	got, err := ScanSecrets(root, paths, nil)
	if err != nil {
		t.Fatal(err)
	}
	byPath := map[string][]Finding{}
	for _, f := range got {
		byPath[f.Path] = append(byPath[f.Path], f)
	}
	for p, c := range cases {
		fs := byPath[p]
		if c.rule == "" {
			if len(fs) != 0 {
				t.Errorf("%s: false positive %v", p, fs)
			}
			continue
		}
		if len(fs) != 1 || fs[0].Rule != c.rule {
			t.Errorf("%s: findings %v, want one %s", p, fs, c.rule)
		}
	}
	if f := byPath["asia.txt"]; len(f) == 1 && f[0].Line != 3 {
		t.Errorf("asia.txt: line %d, want 3", f[0].Line)
	}
	for _, f := range got {
		for _, c := range cases {
			if c.rule != "" && strings.Contains(f.String(), strings.TrimSpace(c.text)) {
				t.Errorf("finding %s shows the secret", f)
			}
		}
	}
}

func TestScanSecretsKnown(t *testing.T) {
	root := t.TempDir()
	b64 := base64.StdEncoding.EncodeToString([]byte(knownSecret))
	// Inside a longer base64 stream (a file encoded whole), wrapped at 76
	// columns as base64(1) does.
	// The secret's base64 starts at column 60 and crosses the break.
	long := base64.StdEncoding.EncodeToString([]byte("user:" + strings.Repeat("p", 40) + knownSecret + strings.Repeat(" padding", 12)))
	var wrapped strings.Builder
	for i := 0; i < len(long); i += 76 {
		wrapped.WriteString(long[i:min(len(long), i+76)] + "\n")
	}
	files := map[string]string{
		"plain.env":   "A=1\nKEY=" + knownSecret + "\n",
		"b64.txt":     "one\ntwo\nsecret: " + b64 + "\n",
		"header.txt":  "Authorization: Basic " + base64.StdEncoding.EncodeToString([]byte("x:"+knownSecret)) + "\n",
		"hex.txt":     hex.EncodeToString([]byte(knownSecret)),
		"url.txt":     "https://x/?k=" + url.QueryEscape(knownSecret+"/&"),
		"wrapped.txt": "data:\n" + wrapped.String(),
		"clean.txt":   "nothing " + knownSecret[:10] + " here\n",
	}
	writeFiles(t, root, files)
	got, err := ScanSecrets(root, []string{"plain.env", "b64.txt", "header.txt", "hex.txt", "url.txt", "wrapped.txt", "clean.txt"}, []string{knownSecret, "short", ""})
	if err != nil {
		t.Fatal(err)
	}
	want := []Finding{
		{"b64.txt", 3, RuleKnownSecret},
		{"header.txt", 1, RuleKnownSecret},
		{"hex.txt", 1, RuleKnownSecret},
		{"plain.env", 2, RuleKnownSecret},
		{"url.txt", 1, RuleKnownSecret},
		{"wrapped.txt", 2, RuleKnownSecret},
	}
	if !slices.Equal(got, want) {
		t.Errorf("findings = %v, want %v", got, want)
	}
	for _, f := range got {
		if strings.Contains(f.String(), knownSecret) || strings.Contains(f.String(), b64) {
			t.Errorf("finding %s shows the secret", f)
		}
	}
}

func TestScanSecretsFiles(t *testing.T) {
	root := t.TempDir()
	outside := t.TempDir()
	writeFiles(t, outside, map[string]string{"creds": "KEY=" + fakeAWS + "\n"})
	writeFiles(t, root, map[string]string{"dir/ok.txt": "fine\n"})
	if err := os.Symlink(filepath.Join(outside, "creds"), filepath.Join(root, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(root, "dirlink")); err != nil {
		t.Fatal(err)
	}
	// A secret past the first MaxScanBytes is not seen; one before is.
	big := strings.Repeat("x", MaxScanBytes) + "\n" + fakeAWS + "\n"
	early := fakeGHP + "\n" + strings.Repeat("y", MaxScanBytes)
	writeFiles(t, root, map[string]string{"big.txt": big, "early.txt": early})

	got, err := ScanSecrets(root, []string{"link", "dirlink/creds", "missing.txt", "dir", "dir/ok.txt", "big.txt", "early.txt"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := []Finding{{"early.txt", 1, "github-token"}}; !slices.Equal(got, want) {
		t.Errorf("findings = %v, want %v (symlinks not followed, scan capped)", got, want)
	}
	for _, bad := range []string{"../x", "/etc/passwd", "dir/../../x"} {
		if _, err := ScanSecrets(root, []string{bad}, nil); err == nil {
			t.Errorf("ScanSecrets(%q) accepted a path outside the tree", bad)
		}
	}
	if s := (Finding{Path: "a/b.env", Line: 3, Rule: "aws-access-key-id"}).String(); s != "a/b.env:3 (aws-access-key-id)" {
		t.Errorf("String = %q", s)
	}
}

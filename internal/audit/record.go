// Package audit keeps the API's audit trail (docs/security.md, "Audit"):
// one JSON object per line in a file that rotates by size and keeps a
// bounded number of old files, and optionally a copy of each line to
// syslog. What goes into a record is the API server's business
// (internal/apiserver/audit.go); this package only writes, rotates and
// reads records, and never fails its caller: a record that cannot be
// written is logged and counted.
package audit

import (
	"time"
	"unicode/utf8"
)

// Record is one line of the audit log: who asked what about which
// object, and the answer. It mirrors apiv1.AuditRecord; its JSON keys are
// the proto's field names, every key on every line, so that tools (jq,
// a SIEM) see one stable shape. It never holds a request's or a
// response's body.
type Record struct {
	Time      time.Time `json:"time"`
	Identity  string    `json:"identity"`
	Role      string    `json:"role"`
	Method    string    `json:"method"`
	Namespace string    `json:"namespace"`
	Name      string    `json:"name"`
	UID       string    `json:"uid"`
	Code      string    `json:"code"`
	Message   string    `json:"message"`
	Peer      string    `json:"peer"`
	Server    string    `json:"server"`
}

// MaxMessage caps a record's message in bytes: an error's message says
// why a call failed, and a longer one (a list of every validation error)
// would make the log grow with what callers send.
const MaxMessage = 512

// capMessage cuts s to MaxMessage bytes at a rune boundary, marking the
// cut.
func capMessage(s string) string {
	if len(s) <= MaxMessage {
		return s
	}
	const mark = "…"
	cut := MaxMessage - len(mark)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + mark
}

package provider

import (
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/path"
)

// API field paths, as validation errors name them
// ("spec.template.spec.domain.devices.disks[1].name"), and the attribute
// paths they map to: what each kind's attribute mapping (its errors part)
// builds on.

// normalizeFieldPath replaces every [index] or [key] of a Kubernetes field
// path with [*] and returns their contents in order.
func normalizeFieldPath(field string) (string, []string) {
	var b strings.Builder
	var args []string
	for {
		open := strings.IndexByte(field, '[')
		if open < 0 {
			b.WriteString(field)
			break
		}
		end := strings.IndexByte(field[open:], ']')
		if end < 0 {
			b.WriteString(field)
			break
		}
		b.WriteString(field[:open])
		b.WriteString("[*]")
		args = append(args, field[open+1:open+end])
		field = field[open+end+1:]
	}
	return b.String(), args
}

// underPath is p with base's steps before its own: the attribute p names,
// in the block at base.
func underPath(base, p path.Path) path.Path {
	out := base
	for _, s := range p.Steps() {
		switch s := s.(type) {
		case path.PathStepAttributeName:
			out = out.AtName(string(s))
		case path.PathStepElementKeyInt:
			out = out.AtListIndex(int(s))
		case path.PathStepElementKeyString:
			out = out.AtMapKey(string(s))
		case path.PathStepElementKeyValue:
			out = out.AtSetValue(s.Value)
		}
	}
	return out
}

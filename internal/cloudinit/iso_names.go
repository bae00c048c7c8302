package cloudinit

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// Limits on the names the writer accepts. Rock Ridge's NM entry must fit
// in one directory record beside the other entries (no NM continuation is
// written); Joliet allows 64 UCS-2 characters.
const (
	maxRockRidgeName = 180
	maxJolietName    = 64
)

func checkFileName(name string) error {
	switch {
	case name == "" || name == "." || name == "..":
		return fmt.Errorf("invalid file name %q", name)
	case !utf8.ValidString(name):
		return fmt.Errorf("file name %q is not UTF-8", name)
	case strings.ContainsAny(name, "/;\x00"):
		return fmt.Errorf("file name %q must not contain '/', ';' or NUL", name)
	case len(name) > maxRockRidgeName:
		return fmt.Errorf("file name %q is longer than %d bytes", name, maxRockRidgeName)
	case len(utf16.Encode([]rune(name))) > maxJolietName:
		return fmt.Errorf("file name %q is longer than %d Joliet characters", name, maxJolietName)
	}
	return nil
}

// level1Names maps each name to a distinct ISO 9660 level 1 identifier
// ("meta-data" -> "META_DAT.;1"): up to 8 d-characters (A-Z 0-9 _), a dot,
// up to 3 for the extension, and the version. Strict level 1 keeps every
// reader of the plain tree happy; readers that know Rock Ridge or Joliet
// (Linux, cloud-init's hosts, Windows, libarchive) show the real names.
func level1Names(names []string) []string {
	out := make([]string, len(names))
	used := map[string]bool{}
	for i, n := range names {
		base, ext := n, ""
		if j := strings.LastIndexByte(n, '.'); j > 0 {
			base, ext = n[:j], n[j+1:]
		}
		base, ext = dChars(base, 8), dChars(ext, 3)
		if base == "" {
			base = "_"
		}
		id := base + "." + ext + ";1"
		// Collisions ("user-data" and "user_data") get a numeric tail.
		for k := 1; used[id]; k++ {
			suffix := strconv.Itoa(k)
			id = base[:min(len(base), 8-len(suffix))] + suffix + "." + ext + ";1"
		}
		used[id] = true
		out[i] = id
	}
	return out
}

// dChars upper-cases s, replaces what is not a d-character with '_' and
// cuts it to n characters.
func dChars(s string, n int) string {
	var b strings.Builder
	for _, r := range strings.ToUpper(s) {
		if b.Len() == n {
			break
		}
		if r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	return b.String()
}

// jolietName is the Joliet identifier: the name in UCS-2, without the
// ";1" version suffix of ISO 9660 identifiers, as genisoimage writes it
// (readers that do not strip versions then still show the plain name).
func jolietName(name string) []byte {
	return ucs2(name)
}

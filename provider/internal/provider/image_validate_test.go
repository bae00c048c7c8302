package provider

import (
	"context"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
)

func TestImageValidators(t *testing.T) {
	for _, c := range []struct {
		v    validator.String
		in   string
		want bool
		says string
	}{
		{imageNameValidator(), "debian-12.qcow2", true, ""},
		{imageNameValidator(), "ubuntu.24.04.img", true, ""},
		{imageNameValidator(), "Debian.qcow2", false, "lower case"},
		{imageNameValidator(), "debian/12.qcow2", false, ""},
		{imageNameValidator(), "", false, ""},
		{imageURLValidator(), "https://images.example/debian.qcow2", true, ""},
		{imageURLValidator(), "http://10.0.0.1:8080/a.raw", true, ""},
		{imageURLValidator(), "file:///srv/images/a.qcow2", true, ""},
		{imageURLValidator(), "ftp://images.example/a.qcow2", false, "ftp"},
		{imageURLValidator(), "https://user:secret@images.example/a.qcow2", false, "credentials"},
		{imageURLValidator(), "file:///srv/../a.qcow2", false, "clean"},
		{imageURLValidator(), "https:///a.qcow2", false, "host"},
		{sha256Validator(), testSum, true, ""},
		{sha256Validator(), testSumUpper, true, ""},
		{sha256Validator(), " " + testSum, false, "64 hex digits"},
		{sha256Validator(), testSum[:63], false, "63 characters"},
		{sha256Validator(), strings.Repeat("g", 64), false, "64 hex digits"},
	} {
		ok, msg := validString(c.v, c.in)
		if ok != c.want || !strings.Contains(msg, c.says) {
			t.Errorf("%q (%s) = %v %q, want %v saying %q", c.in, c.v.Description(context.Background()), ok, msg, c.want, c.says)
		}
		if strings.Contains(msg, "secret") {
			t.Errorf("%q (%s): the message repeats the password: %s", c.in, c.v.Description(context.Background()), msg)
		}
	}
}

func TestFormatContradiction(t *testing.T) {
	for _, c := range []struct {
		name, format string
		bad          bool
	}{
		{"debian.qcow2", "qcow2", false},
		{"debian.qcow2", "raw", true},
		{"disk.raw", "qcow2", true},
		{"debian.img", "raw", false},
		{"debian.img", "qcow2", false},
		{"debian.qcow2", "vmdk", false}, // the format's own validator says so
	} {
		got := formatContradiction(c.name, c.format)
		if (got != "") != c.bad {
			t.Errorf("formatContradiction(%q, %q) = %q, want contradiction %v", c.name, c.format, got, c.bad)
		}
		if c.bad && !strings.Contains(got, "extension") {
			t.Errorf("formatContradiction(%q, %q) = %q does not name the extension", c.name, c.format, got)
		}
	}
}

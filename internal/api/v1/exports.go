package apiv1

import (
	"crypto/sha256"
	"encoding/hex"
	"net/url"
	"time"
)

// KindExport is the kind of VirtualMachineExport objects.
const KindExport = "VirtualMachineExport"

// Phases of an export (KubeVirt's VirtualMachineExportPhase).
const (
	ExportPending    = "Pending"
	ExportReady      = "Ready"
	ExportTerminated = "Terminated"
	ExportSkipped    = "Skipped"
)

// Reasons of an export's Ready condition.
const (
	ExportReasonServing     = "Serving"
	ExportReasonVMRunning   = "VMRunning"
	ExportReasonVMStarted   = "VMStarted"
	ExportReasonExpired     = "Expired"
	ExportReasonNoVolumes   = "NoVolumes"
	ExportReasonNoNode      = "NoExportNode"
	ExportReasonSourceGone  = "SourceNotFound"
	ExportReasonUnsupported = "Unsupported"
)

// Formats an export serves each volume in.
const (
	ExportFormatRaw   = "raw"
	ExportFormatGzip  = "gzip"
	ExportFormatQcow2 = "qcow2"
)

// ExportFormats are the formats in the order links are listed.
var ExportFormats = []string{ExportFormatRaw, ExportFormatGzip, ExportFormatQcow2}

// exportFiles are the file names of a volume's formats in its URL.
var exportFiles = map[string]string{
	ExportFormatRaw:   "disk.img",
	ExportFormatGzip:  "disk.img.gz",
	ExportFormatQcow2: "disk.qcow2",
}

// ExportFormatOfFile is the format a URL's file name asks for.
func ExportFormatOfFile(file string) (string, bool) {
	for f, name := range exportFiles {
		if name == file {
			return f, true
		}
	}
	return "", false
}

// TTLs of an export: KubeVirt's default, and the bounds the API holds
// (a link that outlives a week is a standing credential).
const (
	DefaultExportTTL = 2 * time.Hour
	MinExportTTL     = time.Minute
	MaxExportTTL     = 168 * time.Hour
)

// ExportTokenHeader carries an export's token in a download request
// (KubeVirt's x-kubevirt-export-token). Only the header: a token in a
// query string ends up in logs and shell histories.
const ExportTokenHeader = "X-Virtplane-Export-Token"

// ExportPathPrefix starts every export URL path.
const ExportPathPrefix = "/v1/exports/"

// ExportURL is the link to one volume of an export in a format, on the
// node whose export address is addr (host:port, as registered).
func ExportURL(addr, namespace, name, volume, format string) string {
	u := url.URL{
		Scheme: "https", Host: addr,
		Path: ExportPathPrefix + namespace + "/" + name + "/volumes/" + volume + "/" + exportFiles[format],
	}
	return u.String()
}

// Terminal says whether the export will never serve again.
func (e *VirtualMachineExport) Terminal() bool {
	p := e.GetStatus().GetPhase()
	return p == ExportTerminated || p == ExportSkipped
}

// Link is the URL of volume in format, or "".
func (e *VirtualMachineExport) Link(volume, format string) string {
	for _, v := range e.GetStatus().GetVolumes() {
		if v.GetName() != volume {
			continue
		}
		for _, l := range v.GetLinks() {
			if l.GetFormat() == format {
				return l.GetUrl()
			}
		}
	}
	return ""
}

// ExportTokenHash is what the server keeps of an export's token
// (status.token_sha256): lowercase hex SHA-256. A 256-bit random token
// cannot be found from it.
func ExportTokenHash(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

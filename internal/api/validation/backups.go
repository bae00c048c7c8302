package validation

import (
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
	"k8s.io/apimachinery/pkg/util/validation/field"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// The backup kinds as users submit them (backups.proto). A target is
// cluster-scoped and updated in place; backups and restores are
// immutable; a schedule's timing and retention may change.

// Bounds of the backup kinds.
const (
	// MaxScheduleNameLen keeps a schedule's backups' names
	// (<schedule>-<unix seconds>, apiv1.ScheduledBackupName) DNS labels.
	MaxScheduleNameLen = 52
	// MinBackupInterval is the shortest "@every" a schedule may have: a
	// backup takes a snapshot and reads every volume.
	MinBackupInterval = 10 * time.Second
	// MaxRetention bounds each retention rule.
	MaxRetention = 1000
	// maxEndpointLen, maxPrefixLen and maxCACertBytes bound an S3
	// target's settings.
	maxEndpointLen = 256
	maxPrefixLen   = 256
	maxCACertBytes = 64 << 10
	// MaxBackupVolumeBytes bounds what a node reports of one volume (1 PiB).
	MaxBackupVolumeBytes = 1 << 50
)

var (
	// S3's bucket naming rules (the DNS-compatible ones every service
	// takes).
	s3BucketRegexp = regexp.MustCompile(`^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$`)
	// A prefix is part of every object key: the repository's key
	// alphabet, slash-separated segments, none "." or "..".
	s3PrefixRegexp = regexp.MustCompile(`^[a-z0-9._-]+(/[a-z0-9._-]+)*$`)
	s3RegionRegexp = regexp.MustCompile(`^[a-z0-9-]{0,32}$`)
	s3AccessRegexp = regexp.MustCompile(`^[A-Za-z0-9._+/=-]{1,128}$`)
	// A secret key is printable ASCII without spaces: it goes into an
	// HMAC and nowhere else.
	s3SecretRegexp = regexp.MustCompile(`^[\x21-\x7e]{1,256}$`)
)

// ValidateBackupTarget checks a target as created (requireKey: an s3
// target needs its secret key) or updated (an empty secret key keeps the
// stored one).
func ValidateBackupTarget(t *apiv1.BackupTarget, requireKey bool) field.ErrorList {
	meta := field.NewPath("metadata")
	errs := ValidateObjectMeta(t.GetMetadata(), false, meta)
	if name := t.GetMetadata().GetName(); name != "" {
		// A label, not a subdomain: the name is a directory on the nodes.
		errs = append(errs, dns1123Label(name, meta.Child("name"))...)
	}
	spec := field.NewPath("spec")
	s := t.GetSpec()
	if s == nil {
		return append(errs, field.Required(spec, ""))
	}
	errs = append(errs, validateLabels(s.GetNodeSelector(), spec.Child("node_selector"))...)
	switch {
	case s.GetDirectory() != nil && s.GetS3() != nil:
		errs = append(errs, field.Invalid(spec, "directory, s3", "set exactly one of directory and s3"))
	case s.GetDirectory() != nil:
		errs = append(errs, validateTargetDir(s.GetDirectory().GetPath(), spec.Child("directory", "path"))...)
	case s.GetS3() != nil:
		errs = append(errs, validateS3(s.GetS3(), spec.Child("s3"), requireKey)...)
	default:
		errs = append(errs, field.Required(spec, "set exactly one of directory and s3"))
	}
	return errs
}

// validateTargetDir checks a directory target's path as a shared
// filesystem's mount path is checked: absolute, clean, not "/", of an
// allow-listed alphabet.
func validateTargetDir(p string, path *field.Path) field.ErrorList {
	if p == "" {
		return field.ErrorList{field.Required(path, "the absolute path of the directory, mounted at that path on the servers and on every node the target selects")}
	}
	return ValidateSharedPath(p, path)
}

func validateS3(s *apiv1.S3BackupTarget, path *field.Path, requireKey bool) field.ErrorList {
	var errs field.ErrorList
	https := false
	ep := path.Child("endpoint")
	if msg := checkEndpoint(s.GetEndpoint()); msg != "" {
		errs = append(errs, field.Invalid(ep, clip(s.GetEndpoint()), msg))
	} else {
		https = strings.HasPrefix(s.GetEndpoint(), "https://")
	}
	if !s3BucketRegexp.MatchString(s.GetBucket()) || strings.Contains(s.GetBucket(), "..") {
		errs = append(errs, field.Invalid(path.Child("bucket"), s.GetBucket(), "must be 3-63 lower-case letters, digits, '.' and '-', starting and ending with a letter or digit"))
	}
	if p := s.GetPrefix(); p != "" {
		switch {
		case len(p) > maxPrefixLen:
			errs = append(errs, field.TooLong(path.Child("prefix"), "", maxPrefixLen))
		case !s3PrefixRegexp.MatchString(p) || hasDotSegment(p):
			errs = append(errs, field.Invalid(path.Child("prefix"), p, "must be '/'-separated segments of lower-case letters, digits, '.', '_' and '-', none '.' or '..', no leading or trailing '/'"))
		}
	}
	if !s3RegionRegexp.MatchString(s.GetRegion()) {
		errs = append(errs, field.Invalid(path.Child("region"), s.GetRegion(), "must be up to 32 lower-case letters, digits and '-'"))
	}
	if !s3AccessRegexp.MatchString(s.GetAccessKey()) {
		errs = append(errs, field.Invalid(path.Child("access_key"), clip(s.GetAccessKey()), "must be 1-128 letters, digits, '.', '_', '+', '/', '=' or '-'"))
	}
	switch k := s.GetSecretKey(); {
	case k == "" && requireKey:
		errs = append(errs, field.Required(path.Child("secret_key"), "the secret key of access_key"))
	case k != "" && !s3SecretRegexp.MatchString(k):
		// The value is a secret: never echoed back.
		errs = append(errs, field.Invalid(path.Child("secret_key"), "(hidden)", "must be 1-256 printable ASCII characters without spaces"))
	}
	if ca := s.GetCaCert(); ca != "" {
		cp := path.Child("ca_cert")
		switch {
		case !https:
			errs = append(errs, field.Forbidden(cp, "only with an https:// endpoint"))
		case len(ca) > maxCACertBytes:
			errs = append(errs, field.TooLong(cp, "", maxCACertBytes))
		default:
			if msg := checkCACert(ca); msg != "" {
				errs = append(errs, field.Invalid(cp, "(PEM)", msg))
			}
		}
	}
	return errs
}

// checkEndpoint says what is wrong with an S3 endpoint, or "".
func checkEndpoint(e string) string {
	const want = "must be http:// or https:// and a host with an optional port, no path, query or credentials (https://s3.example.com:443)"
	if e == "" || len(e) > maxEndpointLen {
		return want
	}
	u, err := url.Parse(e)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.User != nil || u.Opaque != "" ||
		(u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || u.Host == "" {
		return want
	}
	host := u.Hostname()
	if host == "" {
		return want
	}
	if port := u.Port(); port != "" {
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return want
		}
	}
	if net.ParseIP(host) == nil && dns1123Subdomain(host, field.NewPath("host")) != nil {
		return want
	}
	return ""
}

// checkCACert says what is wrong with a PEM bundle of CA certificates.
func checkCACert(ca string) string {
	rest := []byte(ca)
	n := 0
	for {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			return "must hold only CERTIFICATE blocks"
		}
		if _, err := x509.ParseCertificate(b.Bytes); err != nil {
			return "a certificate does not parse: " + err.Error()
		}
		n++
	}
	if n == 0 || strings.TrimSpace(string(rest)) != "" {
		return "must be PEM: one or more CERTIFICATE blocks and nothing else"
	}
	return ""
}

func hasDotSegment(p string) bool {
	for _, s := range strings.Split(p, "/") {
		if s == "." || s == ".." {
			return true
		}
	}
	return false
}

// ValidateBackupTargetUpdate refuses changes of where the data is: the
// kind, a directory's path, an S3 endpoint, bucket and prefix.
func ValidateBackupTargetUpdate(t, old *apiv1.BackupTarget) field.ErrorList {
	spec := field.NewPath("spec")
	n, o := t.GetSpec(), old.GetSpec()
	if (n.GetS3() != nil) != (o.GetS3() != nil) {
		return field.ErrorList{field.Invalid(spec, targetKind(t), "the kind of a backup target is immutable (it is "+targetKind(old)+")")}
	}
	var errs field.ErrorList
	errs = append(errs, validateImmutable(n.GetDirectory().GetPath(), o.GetDirectory().GetPath(), spec.Child("directory", "path"))...)
	errs = append(errs, validateImmutable(n.GetS3().GetEndpoint(), o.GetS3().GetEndpoint(), spec.Child("s3", "endpoint"))...)
	errs = append(errs, validateImmutable(n.GetS3().GetBucket(), o.GetS3().GetBucket(), spec.Child("s3", "bucket"))...)
	errs = append(errs, validateImmutable(n.GetS3().GetPrefix(), o.GetS3().GetPrefix(), spec.Child("s3", "prefix"))...)
	return errs
}

func targetKind(t *apiv1.BackupTarget) string {
	if t.GetSpec().GetS3() != nil {
		return "s3"
	}
	return "directory"
}

var backupDeletionPolicies = []string{apiv1.DeletionPolicyRetain, apiv1.DeletionPolicyDelete}

// DefaultBackup fills the namespace and deletion_policy Retain.
func DefaultBackup(b *apiv1.VirtualMachineBackup) {
	if b == nil {
		return
	}
	DiscardUnknown(b)
	b.Metadata = defaultMetadata(b.Metadata)
	if b.Spec == nil {
		b.Spec = &apiv1.VirtualMachineBackupSpec{}
	}
	if b.Spec.DeletionPolicy == "" {
		b.Spec.DeletionPolicy = apiv1.DeletionPolicyRetain
	}
}

// ValidateBackup checks a backup as submitted (after DefaultBackup).
func ValidateBackup(b *apiv1.VirtualMachineBackup) field.ErrorList {
	errs := ValidateObjectMeta(b.GetMetadata(), true, field.NewPath("metadata"))
	spec := field.NewPath("spec")
	sp := b.GetSpec()
	if sp == nil {
		return append(errs, field.Required(spec, ""))
	}
	errs = append(errs, requiredName(sp.GetSource(), spec.Child("source"), "the VM to back up, in the backup's namespace")...)
	errs = append(errs, requiredName(sp.GetTarget(), spec.Child("target"), "the BackupTarget")...)
	if p := sp.GetDeletionPolicy(); p != "" {
		errs = append(errs, oneOf(p, spec.Child("deletion_policy"), backupDeletionPolicies)...)
	}
	return append(errs, validateReplicaSize(b)...)
}

// DefaultBackupSchedule fills the namespace.
func DefaultBackupSchedule(s *apiv1.VirtualMachineBackupSchedule) {
	if s == nil {
		return
	}
	DiscardUnknown(s)
	s.Metadata = defaultMetadata(s.Metadata)
	if s.Spec == nil {
		s.Spec = &apiv1.VirtualMachineBackupScheduleSpec{}
	}
}

// ValidateBackupSchedule checks a schedule as submitted (after
// DefaultBackupSchedule).
func ValidateBackupSchedule(s *apiv1.VirtualMachineBackupSchedule) field.ErrorList {
	meta := field.NewPath("metadata")
	errs := ValidateObjectMeta(s.GetMetadata(), true, meta)
	if n := s.GetMetadata().GetName(); len(n) > MaxScheduleNameLen {
		errs = append(errs, field.TooLong(meta.Child("name"), n, MaxScheduleNameLen))
	}
	spec := field.NewPath("spec")
	sp := s.GetSpec()
	if sp == nil {
		return append(errs, field.Required(spec, ""))
	}
	errs = append(errs, requiredName(sp.GetSource(), spec.Child("source"), "the VM to back up, in the schedule's namespace")...)
	errs = append(errs, requiredName(sp.GetTarget(), spec.Child("target"), "the BackupTarget")...)
	if _, err := ParseBackupSchedule(sp.GetSchedule()); err != nil {
		errs = append(errs, field.Invalid(spec.Child("schedule"), clip(sp.GetSchedule()), err.Error()))
	}
	rp := spec.Child("retention")
	r := sp.GetRetention()
	for _, f := range []struct {
		name string
		v    int32
	}{{"keep_last", r.GetKeepLast()}, {"keep_daily", r.GetKeepDaily()}, {"keep_weekly", r.GetKeepWeekly()}} {
		if f.v < 0 || f.v > MaxRetention {
			errs = append(errs, field.Invalid(rp.Child(f.name), f.v, fmt.Sprintf("must be between 0 and %d", MaxRetention)))
		}
	}
	return append(errs, validateReplicaSize(s)...)
}

// ValidateBackupScheduleUpdate refuses changes of what a schedule backs
// up and where: its backups' retention is judged among themselves.
func ValidateBackupScheduleUpdate(s, old *apiv1.VirtualMachineBackupSchedule) field.ErrorList {
	spec := field.NewPath("spec")
	errs := validateImmutable(s.GetSpec().GetSource(), old.GetSpec().GetSource(), spec.Child("source"))
	return append(errs, validateImmutable(s.GetSpec().GetTarget(), old.GetSpec().GetTarget(), spec.Child("target"))...)
}

// ParseBackupSchedule parses a schedule's spec.schedule, the one
// definition of its syntax: standard cron (5 fields, UTC), a descriptor
// (@hourly, @daily, ...) or "@every <duration>" of at least
// MinBackupInterval. Time zone prefixes are refused: schedules are UTC.
func ParseBackupSchedule(s string) (cron.Schedule, error) {
	if strings.TrimSpace(s) == "" {
		return nil, fmt.Errorf("required: a cron schedule (\"0 3 * * *\"), @daily or \"@every 6h\"")
	}
	if len(s) > 128 {
		return nil, fmt.Errorf("must be at most 128 characters")
	}
	if strings.HasPrefix(s, "TZ=") || strings.HasPrefix(s, "CRON_TZ=") {
		return nil, fmt.Errorf("schedules are in UTC: no TZ= or CRON_TZ= prefix")
	}
	sched, err := cron.ParseStandard(s)
	if err != nil {
		return nil, fmt.Errorf("not a cron schedule: %v", err)
	}
	if every, ok := sched.(cron.ConstantDelaySchedule); ok && every.Delay < MinBackupInterval {
		return nil, fmt.Errorf("an interval must be at least %s", MinBackupInterval)
	}
	return sched, nil
}

// DefaultBackupRestore fills the namespace.
func DefaultBackupRestore(r *apiv1.VirtualMachineBackupRestore) {
	if r == nil {
		return
	}
	DiscardUnknown(r)
	r.Metadata = defaultMetadata(r.Metadata)
	if r.Spec == nil {
		r.Spec = &apiv1.VirtualMachineBackupRestoreSpec{}
	}
}

// ValidateBackupRestore checks a backup restore as submitted (after
// DefaultBackupRestore).
func ValidateBackupRestore(r *apiv1.VirtualMachineBackupRestore) field.ErrorList {
	errs := ValidateObjectMeta(r.GetMetadata(), true, field.NewPath("metadata"))
	spec := field.NewPath("spec")
	sp := r.GetSpec()
	if sp == nil {
		return append(errs, field.Required(spec, ""))
	}
	errs = append(errs, requiredName(sp.GetTarget(), spec.Child("target"), "the BackupTarget that holds the backup")...)
	errs = append(errs, ValidateUID(sp.GetBackupId(), spec.Child("backup_id"))...)
	errs = append(errs, requiredName(sp.GetVmName(), spec.Child("vm_name"), "the new VM's name, in the restore's namespace")...)
	if n := sp.GetNodeName(); n != "" {
		errs = append(errs, dns1123Subdomain(n, spec.Child("node_name"))...)
	}
	macPath := spec.Child("mac_addresses")
	if len(sp.GetMacAddresses()) > 0 && !sp.GetNewIdentity() {
		errs = append(errs, field.Forbidden(macPath, "only with new_identity: without it the VM keeps the backup's MAC addresses"))
	} else {
		errs = append(errs, validateMACMap(sp.GetMacAddresses(), macPath)...)
	}
	errs = append(errs, validateLabels(sp.GetLabels(), spec.Child("labels"))...)
	errs = append(errs, validateAnnotations(sp.GetAnnotations(), spec.Child("annotations"))...)
	return append(errs, validateReplicaSize(r)...)
}

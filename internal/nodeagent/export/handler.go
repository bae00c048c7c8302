package export

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"

	"github.com/klauspost/compress/gzip"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
	"github.com/virtplane/terraform-provider-virtplane/internal/ceph"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/nodedir"
)

// RawSizeHeader tells a gzip download's size once decompressed, so that
// a client can check it got everything.
const RawSizeHeader = "X-Virtplane-Raw-Size"

// request is what a download URL names:
// /v1/exports/<namespace>/<name>/volumes/<volume>/<file>.
type request struct {
	namespace, name, volume, format string
}

func parsePath(p string) (request, bool) {
	rest, ok := strings.CutPrefix(p, apiv1.ExportPathPrefix)
	if !ok {
		return request{}, false
	}
	parts := strings.Split(rest, "/")
	if len(parts) != 5 || parts[2] != "volumes" {
		return request{}, false
	}
	r := request{namespace: parts[0], name: parts[1], volume: parts[3]}
	if errs := validation.ValidateObjectKey(r.namespace, r.name, field.NewPath("path")); len(errs) > 0 {
		return request{}, false
	}
	if len(utilvalidation.IsDNS1123Label(r.volume)) > 0 {
		return request{}, false
	}
	if r.format, ok = apiv1.ExportFormatOfFile(parts[4]); !ok {
		return request{}, false
	}
	return r, true
}

// ServeHTTP serves one download: 401 without the export's token, 403
// once the export does not serve (any more), 404 for what it does not
// have.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	req, ok := parsePath(r.URL.Path)
	if !ok {
		http.Error(w, "not an export link", http.StatusNotFound)
		return
	}
	e, ok := s.inf.Get(req.namespace, req.name)
	// The same answer for an unknown export and a wrong token: a caller
	// without the token learns nothing, not even that the export exists.
	if !ok || !tokenMatches(e, r.Header.Get(apiv1.ExportTokenHeader)) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="virtplane export", header="`+apiv1.ExportTokenHeader+`"`)
		http.Error(w, "missing or wrong export token (header "+apiv1.ExportTokenHeader+")", http.StatusUnauthorized)
		return
	}
	uid := e.GetMetadata().GetUid()
	ectx, live := s.exportContext(uid)
	if !s.serving(e) || !live {
		http.Error(w, fmt.Sprintf("export %s/%s is not served: %s", req.namespace, req.name, s.why(e)), http.StatusForbidden)
		return
	}
	vol := volumeOf(e, req.volume)
	if vol == nil {
		http.Error(w, fmt.Sprintf("export %s/%s has no volume %q", req.namespace, req.name, req.volume), http.StatusNotFound)
		return
	}
	// The download ends with the export: a start of the VM, its deletion
	// or its expiry cuts it.
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	defer context.AfterFunc(ectx, cancel)()

	src, err := s.source(ctx, e, vol)
	if err != nil {
		s.log.Warn("export source refused", "export", req.namespace+"/"+req.name, "volume", req.volume, "err", err)
		http.Error(w, "the volume cannot be served", http.StatusInternalServerError)
		return
	}
	path, err := s.file(ectx, uid, req.volume, req.format, src)
	if err != nil {
		s.log.Warn("export conversion failed", "export", req.namespace+"/"+req.name, "volume", req.volume, "format", req.format, "err", err)
		status := http.StatusInternalServerError
		if ectx.Err() != nil {
			status = http.StatusForbidden
		}
		http.Error(w, "the volume could not be converted", status)
		return
	}
	f, err := os.Open(path)
	if err != nil {
		http.Error(w, "the volume could not be read", http.StatusInternalServerError)
		return
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		http.Error(w, "the volume could not be read", http.StatusInternalServerError)
		return
	}
	s.log.Info("export download", "export", req.namespace+"/"+req.name, "volume", req.volume, "format", req.format,
		"remote", r.RemoteAddr, "range", r.Header.Get("Range") != "")
	body := &ctxReader{ctx: ctx, r: f}
	w.Header().Set("Content-Disposition", `attachment; filename="`+req.volume+"."+fileExt(req.format)+`"`)
	if req.format == apiv1.ExportFormatGzip {
		w.Header().Set("Content-Type", "application/gzip")
		w.Header().Set(RawSizeHeader, strconv.FormatInt(fi.Size(), 10))
		if r.Method == http.MethodHead {
			return
		}
		// Streamed: no file of the compressed image is ever made.
		gz, _ := gzip.NewWriterLevel(w, gzip.BestSpeed)
		_, err = io.Copy(gz, body)
		if err == nil {
			err = gz.Close()
		}
	} else {
		w.Header().Set("Content-Type", "application/octet-stream")
		// Range requests, HEAD and conditional requests come with it.
		http.ServeContent(w, r, "", fi.ModTime(), body)
	}
	if ctx.Err() != nil && r.Context().Err() == nil {
		// Cut, not ended: the client must see a broken download, not a
		// short one that looks whole.
		s.log.Info("export download cut", "export", req.namespace+"/"+req.name, "volume", req.volume, "because", s.why(e))
		panic(http.ErrAbortHandler)
	}
	if err != nil && !errors.Is(err, context.Canceled) {
		s.log.Debug("export download ended", "export", req.namespace+"/"+req.name, "err", err)
	}
}

func tokenMatches(e *apiv1.VirtualMachineExport, token string) bool {
	want := e.GetStatus().GetTokenSha256()
	if token == "" || want == "" {
		return false
	}
	return subtle.ConstantTimeCompare([]byte(apiv1.ExportTokenHash(token)), []byte(want)) == 1
}

// why says in words why an export is not served.
func (s *Server) why(e *apiv1.VirtualMachineExport) string {
	if c := apiv1.FindCondition(e.GetStatus().GetConditions(), apiv1.ConditionReady); c != nil && e.GetStatus().GetPhase() != apiv1.ExportReady {
		return e.GetStatus().GetPhase() + " (" + c.GetReason() + ")"
	}
	if exp := e.GetStatus().GetExpirationTime(); exp != nil && !s.opts.Clock.Now().Before(exp.AsTime()) {
		return "expired at " + exp.AsTime().UTC().Format("2006-01-02T15:04:05Z")
	}
	if e.GetStatus().GetPhase() == apiv1.ExportReady {
		return "ended"
	}
	return e.GetStatus().GetPhase()
}

func volumeOf(e *apiv1.VirtualMachineExport, name string) *apiv1.ExportVolume {
	for _, v := range e.GetStatus().GetVolumes() {
		if v.GetName() == name {
			return v
		}
	}
	return nil
}

// volumeSource is where a volume is read from: a qcow2 file, or an RBD
// image of a class's pool.
type volumeSource struct {
	path  string
	rbd   *ceph.Conn
	image string
}

// source is where a volume of e is read from, built here from checked
// uids and names, never taken from the export: a local volume in the
// VM's directory (whose vm.json must name the export's VM), one on a
// shared filesystem class in that class's tree, an RBD volume of the VM
// in an rbd class's pool (named by the VM's uid), or a snapshot's copy
// of a local volume (whose content must be of the export's namespace).
func (s *Server) source(ctx context.Context, e *apiv1.VirtualMachineExport, vol *apiv1.ExportVolume) (volumeSource, error) {
	st := e.GetStatus()
	if c := st.GetContentUid(); c != "" {
		path, err := s.snapshotPath(e, c, vol.GetName())
		return volumeSource{path: path}, err
	}
	layout := s.opts.Layout
	if !(&apiv1.PersistentVolume{StorageClass: vol.GetStorageClass()}).IsLocal() {
		if s.opts.Classes == nil {
			return volumeSource{}, fmt.Errorf("storage class %s: this node has no storage classes", vol.GetStorageClass())
		}
		class, err := s.opts.Classes.Lookup(ctx, vol.GetStorageClass())
		if err != nil {
			return volumeSource{}, err
		}
		switch {
		case class.RBD() != nil:
			if class.Conn == nil {
				return volumeSource{}, fmt.Errorf("storage class %s: not connected", vol.GetStorageClass())
			}
			if err := validation.CheckUID(st.GetSourceUid()); err != nil {
				return volumeSource{}, err
			}
			return volumeSource{rbd: class.Conn, image: ceph.VolumeImage(st.GetSourceUid(), vol.GetName())}, nil
		case class.SharedPath() == "":
			return volumeSource{}, fmt.Errorf("storage class %s is not a shared filesystem", vol.GetStorageClass())
		}
		layout = class.SharedLayout()
	}
	vmDir, err := layout.VMDir(st.GetSourceUid())
	if err != nil {
		return volumeSource{}, err
	}
	if err := nodedir.CheckVMDirOwner(vmDir, e.GetMetadata().GetNamespace(), e.GetSpec().GetSourceName()); err != nil {
		return volumeSource{}, err
	}
	path, err := nodedir.FileIn(nodedir.VolumesDir(vmDir), vol.GetName()+".qcow2")
	if err != nil {
		return volumeSource{}, err
	}
	path, err = regularFile(path)
	return volumeSource{path: path}, err
}

// snapshotPath is the copy of volume in snapshot content c, which must
// be of the export's namespace.
func (s *Server) snapshotPath(e *apiv1.VirtualMachineExport, c, volume string) (string, error) {
	if s.opts.Contents == nil {
		return "", errors.New("this node takes no part in snapshots")
	}
	ns := e.GetMetadata().GetNamespace()
	owner, ok, _ := s.opts.Contents.Owner(c)
	if !ok || owner != ns {
		return "", fmt.Errorf("snapshot content %s is not of namespace %s", c, ns)
	}
	p, err := s.opts.Layout.SnapshotVolumePath(c, volume)
	if err != nil {
		return "", err
	}
	return regularFile(p)
}

// regularFile is path when it names a regular file (not a link).
func regularFile(path string) (string, error) {
	fi, err := os.Lstat(path)
	if err != nil {
		return "", err
	}
	if !fi.Mode().IsRegular() {
		return "", fmt.Errorf("%s is not a regular file", path)
	}
	return path, nil
}

// ctxReader ends a download's reads when its context does.
type ctxReader struct {
	ctx context.Context
	r   *os.File
}

func (c *ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

func (c *ctxReader) Seek(off int64, whence int) (int64, error) { return c.r.Seek(off, whence) }

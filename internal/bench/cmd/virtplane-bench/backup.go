package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/virtplane/terraform-provider-virtplane/internal/backup/repo"
	"github.com/virtplane/terraform-provider-virtplane/internal/backup/repo/rbddiff"
	"github.com/virtplane/terraform-provider-virtplane/internal/bench"
	cephcli "github.com/virtplane/terraform-provider-virtplane/internal/ceph"
	"github.com/virtplane/terraform-provider-virtplane/internal/procfs"
	"github.com/virtplane/terraform-provider-virtplane/internal/testutil/ceph"
	"github.com/virtplane/terraform-provider-virtplane/internal/testutil/multinode"
)

var backupCfg struct{ sizeMiB, dataMiB, changeMiB int }

var backupBench = &measurement{
	name: "backup", id: "9-backup", title: "9. Backups: a volume's full and incremental backup against rbd export and qemu-img convert",
	flags: func(fs *flag.FlagSet, full bool) func() string {
		fs.IntVar(&backupCfg.sizeMiB, "size-mib", byMode(full, 1024, 4096), "the volume's size in MiB")
		fs.IntVar(&backupCfg.dataMiB, "data-mib", byMode(full, 256, 2048), "MiB of data in it (the rest never written)")
		fs.IntVar(&backupCfg.changeMiB, "change-mib", byMode(full, 16, 64), "MiB changed before the incremental backup")
		return func() string {
			return fmt.Sprintf("-size-mib %d -data-mib %d -change-mib %d", backupCfg.sizeMiB, backupCfg.dataMiB, backupCfg.changeMiB)
		}
	},
	run: runBackup,
}

// backupEnv is the benchmark's Ceph cluster (with its radosgw) and the
// two kinds of target.
type backupEnv struct {
	dir  string
	conn *cephcli.Conn
	// local and rbd are the repositories of each volume, in a directory
	// and in S3: apart, so that the rbd image's backup, which holds the
	// same bytes as the file, is not deduplicated against the file's.
	local, rbd [2]*repo.Repo
}

func runBackup(ctx context.Context, e *env, s *bench.Section) (err error) {
	if reason := ceph.Unavailable(); reason != "" {
		return errors.New(reason)
	}
	if backupCfg.dataMiB > backupCfg.sizeMiB || backupCfg.changeMiB > backupCfg.dataMiB || backupCfg.changeMiB < 1 {
		return fmt.Errorf("-data-mib %d, -change-mib %d: want 1 <= change <= data <= size %d", backupCfg.dataMiB, backupCfg.changeMiB, backupCfg.sizeMiB)
	}
	began := time.Now()
	run, err := multinode.Launch(ctx, 0, multinode.Options{NamePrefix: e.prefix + "bk", HostLink: true}, slogLogf{e.log})
	if err != nil {
		return err
	}
	defer func() {
		if cerr := run.Close(slogLogf{e.log}, false); cerr != nil && err == nil {
			err = cerr
		}
	}()
	cl, err := ceph.StartInHub(ctx, run.Hub(), slogLogf{e.log})
	if err != nil {
		return err
	}
	defer func() {
		if cerr := cl.Close(); cerr != nil && err == nil {
			err = cerr
		}
	}()
	cephUp := time.Since(began)
	g, err := cl.RGW(ctx, ceph.RGWOptions{}, slogLogf{e.log})
	if err != nil {
		return err
	}
	rss, _ := g.RSSBytes()
	b, err := newBackupEnv(ctx, e, cl, g)
	if err != nil {
		return err
	}
	size, data, change := int64(backupCfg.sizeMiB)<<20, int64(backupCfg.dataMiB)<<20, int64(backupCfg.changeMiB)<<20
	s.Setup = []string{
		fmt.Sprintf("A Ceph cluster from Debian's packages in a hub namespace of its own (internal/testutil/ceph: one ceph-mon, one BlueStore ceph-osd on a sparse file, pool size 1), up in %s, and its radosgw (beast, HTTPS with a test CA, on the hub's address; reached from the host's namespace by a host link): up in %s, %s resident.",
			cephUp.Round(100*time.Millisecond), g.Started.Round(100*time.Millisecond), bench.MiB(rss>>10)),
		fmt.Sprintf("The volume: %d MiB, its first %d MiB written (half of every 4 KiB random, half one repeated byte: about 2:1 for zstd), the rest a hole; a raw file on this host's disk for the local rows, the same bytes imported into an rbd image (4 MiB objects) for the rbd rows. Then %d MiB rewritten at 1/3 of the data, off object boundaries, and the incremental backups taken.", backupCfg.sizeMiB, backupCfg.dataMiB, backupCfg.changeMiB),
		"Targets: a directory on this host's disk, and a bucket of the radosgw (both `internal/backup/repo`, 4 MiB chunks, zstd level 3, 4 chunks at a time); the file and the image, which hold the same bytes, go to repositories of their own (else the image's backup would find every chunk stored already). The reference copies write to this host's disk too. Rates are MiB of the volume's data (not of its size) per second of wall time; page cache dropped before nothing (the host is shared), so the source reads come mostly from memory.",
	}
	return b.measure(ctx, e, s, size, data, change)
}

func newBackupEnv(ctx context.Context, e *env, cl *ceph.Cluster, g *ceph.RGW) (*backupEnv, error) {
	b := &backupEnv{dir: filepath.Join(e.work, "backup")}
	if err := os.Mkdir(b.dir, 0o700); err != nil {
		return nil, err
	}
	key, err := cl.CreateUser(ctx, "bench-backup", "mon", "profile rbd", "osd", "profile rbd pool="+cl.Pool())
	if err != nil {
		return nil, err
	}
	keyFile := filepath.Join(b.dir, "key")
	if err := os.WriteFile(keyFile, []byte(key), 0o600); err != nil {
		return nil, err
	}
	b.conn = &cephcli.Conn{Monitors: cl.Monitors(), Pool: cl.Pool(), User: "bench-backup", KeyFile: keyFile, Timeout: 10 * time.Minute}
	u, err := g.CreateUser(ctx, "bench")
	if err != nil {
		return nil, err
	}
	mc, err := minio.New(strings.TrimPrefix(g.Endpoint, "https://"), &minio.Options{
		Creds: credentials.NewStaticV4(u.AccessKey, u.SecretKey, ""), Secure: true, Transport: g.HTTPClient().Transport,
	})
	if err != nil {
		return nil, err
	}
	if err := mc.MakeBucket(ctx, "bench", minio.MakeBucketOptions{}); err != nil {
		return nil, err
	}
	for _, kind := range []string{"local", "rbd"} {
		d := filepath.Join(b.dir, "target-"+kind)
		if err := os.Mkdir(d, 0o700); err != nil {
			return nil, err
		}
		ds, err := repo.OpenDir(d)
		if err != nil {
			return nil, err
		}
		ss, err := repo.OpenS3(ctx, repo.S3Config{Endpoint: g.Endpoint, Bucket: "bench", Prefix: kind + "/",
			AccessKey: u.AccessKey, SecretKey: u.SecretKey, CACertPEM: g.CACertPEM})
		if err != nil {
			return nil, err
		}
		repos := [2]*repo.Repo{repo.New(ds, repo.Options{}), repo.New(ss, repo.Options{})}
		if kind == "local" {
			b.local = repos
		} else {
			b.rbd = repos
		}
	}
	return b, nil
}

// timed is one row's figures.
type timed struct {
	took          time.Duration
	read, written int64
	cpu           float64
}

func (b *backupEnv) measure(ctx context.Context, e *env, s *bench.Section, size, data, change int64) error {
	raw := filepath.Join(b.dir, "vol.raw")
	if err := writeVolume(raw, size, data); err != nil {
		return err
	}
	const image, tmp = "bench-vol", "bench-vol-tmp"
	if err := b.conn.ImportRaw(ctx, raw, image, tmp); err != nil {
		return err
	}
	if err := b.conn.SnapCreate(ctx, image, "s1"); err != nil {
		return err
	}
	s.NewTable("Full backup (first) and its references", "Volume", "What", "Read", "Written", "Time", "MiB/s of data", "Agent-side CPU")
	row := func(vol, what string, t timed, err error) error {
		if err != nil {
			return fmt.Errorf("%s, %s: %w", vol, what, err)
		}
		s.AddRow(vol, what, mibs(t.read), mibs(t.written), bench.Secs(t.took),
			fmt.Sprintf("%.0f", float64(data)/(1<<20)/t.took.Seconds()), fmt.Sprintf("%.1f s", t.cpu))
		e.log.Info("backup benchmark", "volume", vol, "what", what, "took", t.took, "read", t.read, "written", t.written)
		return nil
	}
	qcow := filepath.Join(b.dir, "copy.qcow2")
	for _, c := range []struct {
		what string
		args []string
	}{{"qemu-img convert -O qcow2 (a copy)", []string{"convert", "-O", "qcow2", raw, qcow}},
		{"qemu-img convert -c -O qcow2 (a compressed copy)", []string{"convert", "-c", "-O", "qcow2", raw, qcow}}} {
		t, err := timeCmd(ctx, "qemu-img", c.args...)
		if err == nil {
			t.written = fileAlloc(qcow)
			t.read = data
		}
		_ = os.Remove(qcow)
		if err := row("local (raw file)", c.what, t, err); err != nil {
			return err
		}
	}
	var localV1 [2]*repo.Volume
	for i, r := range b.local {
		var v *repo.Volume
		t, err := timeFn(func() (int64, int64, error) {
			src, err := repo.OpenRawFile(raw)
			if err != nil {
				return 0, 0, err
			}
			defer src.Close()
			var st repo.WriteStats
			v, st, err = r.WriteRaw(ctx, src, nil, nil)
			return st.BytesRead, st.BytesWritten, err
		})
		localV1[i] = v
		if err := row("local (raw file)", "virtplane backup to "+targetName(i), t, err); err != nil {
			return err
		}
	}
	exp := filepath.Join(b.dir, "export.raw")
	t, err := timeCmdConn(func() error { return b.conn.Export(ctx, image, "s1", exp) })
	t.read, t.written = data, fileAlloc(exp)
	_ = os.Remove(exp)
	if err := row("rbd image", "rbd export (to a raw file)", t, err); err != nil {
		return err
	}
	var rbdV1 [2]*repo.Volume
	for i, r := range b.rbd {
		var v *repo.Volume
		t, err := timeFn(func() (int64, int64, error) {
			var st repo.WriteStats
			var err error
			v, st, err = b.writeRBD(ctx, r, image, "", "s1", nil)
			return st.BytesRead, st.BytesWritten, err
		})
		rbdV1[i] = v
		if err := row("rbd image", "virtplane backup to "+targetName(i)+" (rbd export-diff --whole-object)", t, err); err != nil {
			return err
		}
	}

	// The change, to the file and to the image alike.
	off := data/3 + 12345
	if err := rewrite(raw, off, change); err != nil {
		return err
	}
	if err := b.rewriteRBD(ctx, image, size, off, change); err != nil {
		return err
	}
	if err := b.conn.SnapCreate(ctx, image, "s2"); err != nil {
		return err
	}
	s.NewTable(fmt.Sprintf("Incremental backup after %d MiB changed", backupCfg.changeMiB), "Volume", "What", "Read", "Written", "Time", "MiB/s of data", "Agent-side CPU")
	for i, r := range b.local {
		t, err := timeFn(func() (int64, int64, error) {
			src, err := repo.OpenRawFile(raw)
			if err != nil {
				return 0, 0, err
			}
			defer src.Close()
			_, st, err := r.WriteRaw(ctx, src, localV1[i], nil)
			return st.BytesRead, st.BytesWritten, err
		})
		if err := row("local (raw file)", "virtplane incremental to "+targetName(i)+" (every chunk read and hashed)", t, err); err != nil {
			return err
		}
	}
	for i, r := range b.rbd {
		t, err := timeFn(func() (int64, int64, error) {
			_, st, err := b.writeRBD(ctx, r, image, "s1", "s2", rbdV1[i])
			return st.BytesRead, st.BytesWritten, err
		})
		if err := row("rbd image", "virtplane incremental to "+targetName(i)+" (rbd export-diff --from-snap s1)", t, err); err != nil {
			return err
		}
	}

	s.NewTable("Restore of the full backup", "Volume", "What", "Read", "Written", "Time", "MiB/s of data", "Agent-side CPU")
	for i, r := range b.local {
		out := filepath.Join(b.dir, "restore.raw")
		t, err := timeFn(func() (int64, int64, error) {
			f, err := os.OpenFile(out, os.O_CREATE|os.O_EXCL|os.O_RDWR, 0o600)
			if err != nil {
				return 0, 0, err
			}
			defer f.Close()
			if err := f.Truncate(localV1[i].SizeBytes); err != nil {
				return 0, 0, err
			}
			return 0, data, r.RestoreRaw(ctx, localV1[i], f, nil)
		})
		_ = os.Remove(out)
		if err := row("local (raw file)", "virtplane restore from "+targetName(i)+" (into a sparse file)", t, err); err != nil {
			return err
		}
	}
	for i, r := range b.rbd {
		restored := fmt.Sprintf("bench-restored-%d", i)
		t, err := timeFn(func() (int64, int64, error) {
			if err := b.conn.Create(ctx, restored, rbdV1[i].SizeBytes); err != nil {
				return 0, 0, err
			}
			pr, pw := io.Pipe()
			go func() { pw.CloseWithError(r.RestoreRBDDiff(ctx, rbdV1[i], pw, nil)) }()
			err := b.conn.ImportDiff(ctx, restored, pr)
			pr.CloseWithError(errors.New("import-diff ended"))
			return 0, data, err
		})
		_ = b.conn.Remove(context.WithoutCancel(ctx), restored)
		if err := row("rbd image", "virtplane restore from "+targetName(i)+" (rbd import-diff into a new image)", t, err); err != nil {
			return err
		}
	}
	s.Note("Agent-side CPU: user+system seconds of this process (hashing, compression, TLS) during the row; the CLIs' own (qemu-img, rbd) are children and not counted.")
	return nil
}

func targetName(i int) string { return [...]string{"a directory", "S3 (radosgw)"}[i] }

// writeRBD streams `rbd export-diff` of image@snap into r.
func (b *backupEnv) writeRBD(ctx context.Context, r *repo.Repo, image, from, snap string, base *repo.Volume) (*repo.Volume, repo.WriteStats, error) {
	rc, err := b.conn.ExportDiff(ctx, image, from, snap)
	if err != nil {
		return nil, repo.WriteStats{}, err
	}
	v, st, err := r.WriteRBDDiff(ctx, rc, base, nil)
	if cerr := rc.Close(); err == nil {
		err = cerr
	}
	return v, st, err
}

// rewriteRBD writes the same bytes rewrite writes into the file into
// the image, through import-diff.
func (b *backupEnv) rewriteRBD(ctx context.Context, image string, size, off, n int64) error {
	pr, pw := io.Pipe()
	go func() {
		w := rbddiff.NewWriter(pw)
		_ = w.Size(uint64(size))
		_ = w.Write(uint64(off), changeBytes(n))
		pw.CloseWithError(w.End())
	}()
	err := b.conn.ImportDiff(ctx, image, pr)
	pr.CloseWithError(errors.New("import-diff ended"))
	return err
}

func timeFn(fn func() (read, written int64, err error)) (timed, error) {
	cpu0, _ := procfs.CPUSeconds(os.Getpid())
	began := time.Now()
	read, written, err := fn()
	t := timed{took: time.Since(began), read: read, written: written}
	cpu1, _ := procfs.CPUSeconds(os.Getpid())
	t.cpu = cpu1 - cpu0
	return t, err
}

func timeCmd(ctx context.Context, name string, args ...string) (timed, error) {
	return timeCmdConn(func() error {
		out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("%s: %w: %s", name, err, out)
		}
		return nil
	})
}

func timeCmdConn(fn func() error) (timed, error) {
	return timeFn(func() (int64, int64, error) { return 0, 0, fn() })
}

// fileAlloc is what a file takes on disk.
func fileAlloc(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	if st, ok := fi.Sys().(interface{ Blocks() int64 }); ok {
		return st.Blocks() * 512
	}
	return fi.Size()
}

func mibs(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

// volumeBlock fills a 4 KiB block: half random, half one byte.
func volumeBlock(buf []byte, rng *rand.Rand, n int64) {
	for i := range buf {
		if i < len(buf)/2 {
			buf[i] = byte(rng.Uint32())
		} else {
			buf[i] = byte(n)
		}
	}
}

// writeVolume makes the benchmark's raw volume.
func writeVolume(path string, size, data int64) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	rng := rand.New(rand.NewPCG(1, 2))
	buf := make([]byte, 4<<20)
	for off := int64(0); off < data; off += int64(len(buf)) {
		n := min(int64(len(buf)), data-off)
		for b := int64(0); b < n; b += 4096 {
			volumeBlock(buf[b:b+4096], rng, (off+b)/4096)
		}
		if _, err := f.Write(buf[:n]); err != nil {
			return err
		}
	}
	return f.Truncate(size)
}

// changeBytes are the bytes the change writes (the same for the file and
// the image).
func changeBytes(n int64) []byte {
	rng := rand.New(rand.NewPCG(3, 4))
	buf := make([]byte, n)
	for b := int64(0); b < n; b += 4096 {
		volumeBlock(buf[b:min(b+4096, n)], rng, b/4096+7)
	}
	return buf
}

func rewrite(path string, off, n int64) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = f.WriteAt(changeBytes(n), off)
	return err
}

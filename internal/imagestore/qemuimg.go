package imagestore

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"strings"
)

// imgInfo is the part of `qemu-img info --output=json` the store reads.
type imgInfo struct {
	Format          string `json:"format"`
	VirtualSize     int64  `json:"virtual-size"`
	ClusterSize     int64  `json:"cluster-size"`
	BackingFilename string `json:"backing-filename"`
	Encrypted       bool   `json:"encrypted"`
	FormatSpecific  struct {
		Type string `json:"type"`
		Data struct {
			Corrupt  bool   `json:"corrupt"`
			DataFile string `json:"data-file"`
		} `json:"data"`
	} `json:"format-specific"`
}

// imgCheck is `qemu-img check --output=json`.
type imgCheck struct {
	ImageEndOffset int64 `json:"image-end-offset"`
	Corruptions    int   `json:"corruptions"`
}

// qemuImg runs qemu-img with args (never through a shell) and returns its
// standard output. -U (force share) goes on every call: images in use by
// a running QEMU hold a write lock that would otherwise refuse even a
// read-only look.
func (s *Store) qemuImg(ctx context.Context, args ...string) (stdout []byte, stderr string, err error) {
	cmd := exec.CommandContext(ctx, s.qemuImgPath, args...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err = cmd.Run()
	return out.Bytes(), strings.TrimSpace(errOut.String()), err
}

// info probes path's format and virtual size. The format comes from the
// content, never from the name. shown replaces path in qemu-img's
// messages (an import's temporary file means nothing to the user).
func (s *Store) info(ctx context.Context, path, shown string) (imgInfo, error) {
	out, stderr, err := s.qemuImg(ctx, "info", "-U", "--output=json", path)
	if ctxErr := ctx.Err(); ctxErr != nil {
		return imgInfo{}, ctxErr
	}
	if err != nil {
		return imgInfo{}, fmt.Errorf("%w: qemu-img info: %s", ErrInvalidImage, qemuError(err, stderr, path, shown))
	}
	var info imgInfo
	if err := json.Unmarshal(out, &info); err != nil {
		return imgInfo{}, fmt.Errorf("qemu-img info: parse output: %w", err)
	}
	return info, nil
}

// check runs `qemu-img check` on a qcow2 image. Leaked clusters only
// waste space and are accepted; corruptions, and clusters beyond the end
// of the file (a truncated download), are not.
func (s *Store) check(ctx context.Context, path, shown string, size int64, info imgInfo) error {
	out, stderr, err := s.qemuImg(ctx, "check", "-U", "--output=json", "-f", FormatQCOW2, path)
	if ctxErr := ctx.Err(); ctxErr != nil {
		return ctxErr
	}
	var res imgCheck
	jsonErr := json.Unmarshal(out, &res)
	var exit *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exit) && exit.ExitCode() == 3 && jsonErr == nil:
		// 3: leaks only.
	case errors.As(err, &exit) && exit.ExitCode() == 2 && jsonErr == nil:
		// With clusters past the end the offset stops at the last cluster
		// that is there; qemu-img's message says what happened.
		if strings.Contains(stderr, "exceeding the end of the file") && !truncated(res, info, size) {
			return fmt.Errorf("%w: qcow2 is truncated: the file (%d bytes) ends before clusters it references (qemu-img check: %d corruptions; first: %s)", ErrInvalidImage, size, res.Corruptions, qemuError(err, stderr, path, shown))
		}
		if !truncated(res, info, size) {
			return fmt.Errorf("%w: qemu-img check found %d corruptions; first: %s", ErrInvalidImage, res.Corruptions, qemuError(err, stderr, path, shown))
		}
	default:
		return fmt.Errorf("%w: qemu-img check: %s", ErrInvalidImage, qemuError(err, stderr, path, shown))
	}
	// Also when check finds nothing: a cut at a cluster boundary leaves
	// no reference beyond the end, only missing clusters.
	if truncated(res, info, size) {
		return fmt.Errorf("%w: qcow2 is truncated: its clusters reach byte %d but the file has %d bytes (qemu-img check: %d corruptions)", ErrInvalidImage, res.ImageEndOffset, size, res.Corruptions)
	}
	return nil
}

// truncated says whether the file ends a whole cluster or more before
// its last cluster does. Less proves nothing: image-end-offset is rounded
// up to a cluster, and valid images end inside their last one (qemu-img
// create writes only the used part of a metadata cluster; compressed
// clusters end anywhere), reading the rest as zeros. A cut inside the last
// cluster therefore passes; only a checksum catches that.
func truncated(res imgCheck, info imgInfo, size int64) bool {
	return res.ImageEndOffset-size >= max(info.ClusterSize, 512)
}

// qemuError is the first line of qemu-img's own message ("Could not open
// 'x': Unsupported qcow2 version 99") without its "qemu-img: " prefix and
// with path shown as shown, else the exit error.
func qemuError(err error, stderr, path, shown string) string {
	if line := firstLine(stderr); line != "" {
		return strings.ReplaceAll(strings.TrimPrefix(line, "qemu-img: "), path, shown)
	}
	return err.Error()
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	return line
}

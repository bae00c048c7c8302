package launcher

import (
	"context"
	"io"
	"log"
	"log/slog"
	"strings"

	"github.com/hashicorp/go-hclog"
)

// hclogLevels maps hclog levels to slog; Trace sits below Debug.
var hclogLevels = map[hclog.Level]slog.Level{
	hclog.Trace: slog.LevelDebug - 4,
	hclog.Debug: slog.LevelDebug,
	hclog.Info:  slog.LevelInfo,
	hclog.Warn:  slog.LevelWarn,
	hclog.Error: slog.LevelError,
}

// HCLogger bridges go-plugin's hclog to slog: virtplane logs through slog,
// and hclog is only spoken at the go-plugin boundary.
func HCLogger(l *slog.Logger) hclog.Logger {
	if l == nil {
		l = slog.New(slog.DiscardHandler)
	}
	return &slogHC{l: l}
}

type slogHC struct {
	l       *slog.Logger
	name    string
	implied []any
}

var _ hclog.Logger = (*slogHC)(nil)

func (h *slogHC) Log(level hclog.Level, msg string, args ...any) {
	lv, ok := hclogLevels[level]
	if !ok {
		lv = slog.LevelInfo
	}
	h.l.Log(context.Background(), lv, msg, args...)
}

func (h *slogHC) Trace(msg string, args ...any) { h.Log(hclog.Trace, msg, args...) }
func (h *slogHC) Debug(msg string, args ...any) { h.Log(hclog.Debug, msg, args...) }
func (h *slogHC) Info(msg string, args ...any)  { h.Log(hclog.Info, msg, args...) }
func (h *slogHC) Warn(msg string, args ...any)  { h.Log(hclog.Warn, msg, args...) }
func (h *slogHC) Error(msg string, args ...any) { h.Log(hclog.Error, msg, args...) }

func (h *slogHC) enabled(level hclog.Level) bool {
	return h.l.Enabled(context.Background(), hclogLevels[level])
}

func (h *slogHC) IsTrace() bool { return h.enabled(hclog.Trace) }
func (h *slogHC) IsDebug() bool { return h.enabled(hclog.Debug) }
func (h *slogHC) IsInfo() bool  { return h.enabled(hclog.Info) }
func (h *slogHC) IsWarn() bool  { return h.enabled(hclog.Warn) }
func (h *slogHC) IsError() bool { return h.enabled(hclog.Error) }

func (h *slogHC) ImpliedArgs() []any { return h.implied }

func (h *slogHC) With(args ...any) hclog.Logger {
	return &slogHC{l: h.l.With(args...), name: h.name, implied: append(append([]any(nil), h.implied...), args...)}
}

func (h *slogHC) Name() string { return h.name }

func (h *slogHC) Named(name string) hclog.Logger {
	if h.name != "" {
		name = h.name + "." + name
	}
	return h.ResetNamed(name)
}

func (h *slogHC) ResetNamed(name string) hclog.Logger {
	return &slogHC{l: h.l.With("logger", name), name: name, implied: h.implied}
}

// SetLevel is a no-op: the slog handler owns the level.
func (h *slogHC) SetLevel(hclog.Level) {}

func (h *slogHC) GetLevel() hclog.Level {
	for _, lv := range []hclog.Level{hclog.Trace, hclog.Debug, hclog.Info, hclog.Warn} {
		if h.enabled(lv) {
			return lv
		}
	}
	return hclog.Error
}

func (h *slogHC) StandardLogger(opts *hclog.StandardLoggerOptions) *log.Logger {
	return log.New(h.StandardWriter(opts), "", 0)
}

func (h *slogHC) StandardWriter(*hclog.StandardLoggerOptions) io.Writer {
	return writerFunc(func(p []byte) (int, error) {
		h.Info(strings.TrimRight(string(p), "\n"))
		return len(p), nil
	})
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

package etcdserver

import (
	"context"
	"log/slog"
	"slices"
	"sync/atomic"

	"go.uber.org/zap/zapcore"
)

// slogCore is a zapcore.Core that forwards etcd's zap logs to slog, so
// etcd's warnings end up in the daemon's own log stream.
type slogCore struct {
	h   slog.Handler
	min zapcore.Level
	// stopping demotes everything to debug: embed reports its own closed
	// listeners as errors during a normal shutdown.
	stopping *atomic.Bool
}

// benign are warnings etcd logs on every start of our configuration.
var benign = map[string]bool{
	"Running http and grpc server on single port. This is not recommended for production.": true,
	"simple token is not cryptographically signed":                                         true,
	// The data dir's socket is plain on purpose; the TLS files are for
	// the extra listeners.
	"scheme is http or unix while key and cert files are present; ignoring key and cert files":           true,
	"scheme is http or unix while --client-cert-auth is enabled; ignoring client cert auth for this URL": true,
}

func newSlogCore(h slog.Handler, min zapcore.Level, stopping *atomic.Bool) zapcore.Core {
	return &slogCore{h: h, min: min, stopping: stopping}
}

func (c *slogCore) Enabled(l zapcore.Level) bool {
	return l >= c.min
}

func (c *slogCore) With(fields []zapcore.Field) zapcore.Core {
	return &slogCore{h: c.h.WithAttrs(attrs(fields)), min: c.min, stopping: c.stopping}
}

func (c *slogCore) level(e zapcore.Entry) slog.Level {
	if c.stopping.Load() || benign[e.Message] {
		return slog.LevelDebug
	}
	return slogLevel(e.Level)
}

func (c *slogCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.Enabled(e.Level) && c.h.Enabled(context.Background(), c.level(e)) {
		return ce.AddCore(e, c)
	}
	return ce
}

func (c *slogCore) Write(e zapcore.Entry, fields []zapcore.Field) error {
	r := slog.NewRecord(e.Time, c.level(e), e.Message, 0)
	if e.LoggerName != "" {
		r.AddAttrs(slog.String("logger", e.LoggerName))
	}
	r.AddAttrs(attrs(fields)...)
	return c.h.Handle(context.Background(), r)
}

func (c *slogCore) Sync() error { return nil }

func slogLevel(l zapcore.Level) slog.Level {
	switch {
	case l <= zapcore.DebugLevel:
		return slog.LevelDebug
	case l == zapcore.InfoLevel:
		return slog.LevelInfo
	case l == zapcore.WarnLevel:
		return slog.LevelWarn
	default:
		return slog.LevelError
	}
}

// attrs renders zap fields through zap's own map encoder, which knows
// every field type, and sorts them for stable output.
func attrs(fields []zapcore.Field) []slog.Attr {
	if len(fields) == 0 {
		return nil
	}
	enc := zapcore.NewMapObjectEncoder()
	for _, f := range fields {
		f.AddTo(enc)
	}
	keys := make([]string, 0, len(enc.Fields))
	for k := range enc.Fields {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	out := make([]slog.Attr, 0, len(keys))
	for _, k := range keys {
		out = append(out, slog.Any(k, enc.Fields[k]))
	}
	return out
}

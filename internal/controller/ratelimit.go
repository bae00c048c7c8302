package controller

import "golang.org/x/time/rate"

func newLimiter(qps float64, burst int) *rate.Limiter {
	return rate.NewLimiter(rate.Limit(qps), burst)
}

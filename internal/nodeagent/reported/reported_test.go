package reported

import (
	"context"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/wrapperspb"
	clocktesting "k8s.io/utils/clock/testing"
)

func TestPendingUntilSent(t *testing.T) {
	l := New[*wrapperspb.StringValue]()
	if l.Pending() != nil {
		t.Fatal("pending before any listing")
	}
	a := wrapperspb.String("a")
	if !l.Set(a) {
		t.Fatal("the first listing is a change")
	}
	select {
	case <-l.Changed():
	default:
		t.Fatal("a change did not wake Changed")
	}
	if l.Pending() != a {
		t.Fatal("the first listing is not pending")
	}
	l.MarkSent(a)
	if l.Pending() != nil {
		t.Fatal("pending after the server stored it")
	}
	if l.Set(wrapperspb.String("a")) {
		t.Fatal("an equal listing counted as a change")
	}
	select {
	case <-l.Changed():
		t.Fatal("an equal listing woke Changed")
	default:
	}
	b := wrapperspb.String("b")
	l.Set(b)
	if l.Pending() != b {
		t.Fatal("a new listing is not pending")
	}
}

func TestForRegisterWaitsForTheFirstTry(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	l := New[*wrapperspb.StringValue]()
	got := make(chan *wrapperspb.StringValue)
	go func() { got <- l.ForRegister(context.Background(), clk, time.Minute) }()
	for !clk.HasWaiters() {
		time.Sleep(time.Millisecond) // the goroutine reaching its timer; not a timing assumption
	}
	v := wrapperspb.String("x")
	l.Set(v)
	if g := <-got; g != v {
		t.Fatalf("ForRegister = %v, want the first listing", g)
	}
	// Nothing listed within the wait: the zero value.
	l2 := New[*wrapperspb.StringValue]()
	go func() { got <- l2.ForRegister(context.Background(), clk, time.Minute) }()
	for !clk.HasWaiters() {
		time.Sleep(time.Millisecond)
	}
	clk.Step(time.Minute)
	if g := <-got; g != nil {
		t.Fatalf("ForRegister = %v after the wait, want nil", g)
	}
}

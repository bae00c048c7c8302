package provider

import "testing"

func TestMaxUnavailableValidator(t *testing.T) {
	for _, ok := range []string{"1", "3", "1%", "25%", "100%"} {
		if good, msg := validString(maxUnavailableValidator(), ok); !good {
			t.Errorf("%q refused: %s", ok, msg)
		}
	}
	for _, bad := range []string{"0", "0%", "101%", "-1", "01", "1.5", "", "%", "a"} {
		if good, _ := validString(maxUnavailableValidator(), bad); good {
			t.Errorf("%q accepted", bad)
		}
	}
}

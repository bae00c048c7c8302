package provider

import (
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/types"
)

func TestShortDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{5 * time.Minute: "5m", time.Hour: "1h", 90 * time.Second: "1m30s", 2 * time.Second: "2s"} {
		if got := shortDuration(d); got != want {
			t.Errorf("shortDuration(%s) = %s, want %s", d, got, want)
		}
	}
}

// `x = ""` and `labels = {}` must read back as written, not as null.
func TestEmptyValuesKeepTheirForm(t *testing.T) {
	if got := readString("", types.StringValue("")); got.IsNull() {
		t.Error(`"" read back as null after a config of ""`)
	}
	if got := readString("", types.StringNull()); !got.IsNull() {
		t.Error(`"" read back as "" with no config`)
	}
	var diags = new(diagsT)
	empty := mustMap(t, map[string]string{})
	if got := mapFromAPI(nil, empty, false, &diags.d); got.IsNull() {
		t.Error("empty map read back as null after a config of {}")
	}
	if got := mapFromAPI(nil, types.MapNull(types.StringType), false, &diags.d); !got.IsNull() {
		t.Error("empty map read back as {} with no config")
	}
}

package numbers

import (
	"errors"
	"math"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"
)

func TestCheck(t *testing.T) {
	t.Parallel()
	for _, f := range []float64{0, 1e-9, 0.5, 1e300} {
		require.NoError(t, Check("x", f))
	}
	for _, f := range []float64{math.NaN(), math.Inf(1), math.Inf(-1), -0.5, -1e-300} {
		err := Check("max_budget", f)
		require.ErrorIs(t, err, ErrInvalid, "%v", f)
		var fe *FieldError
		require.True(t, errors.As(err, &fe))
		require.Equal(t, "max_budget", fe.Field)
	}
}

func TestCheckObject(t *testing.T) {
	t.Parallel()
	ok := []string{
		`{}`, `{"input_cost_per_token": 0.000001, "output_cost_per_token": "2e-6", "access_groups": ["a"]}`,
		`{"max_budget": null, "rpm": 10, "timeout": "os.environ/T", "budget_duration": "1d"}`,
		`{"search_context_cost_per_query": {"search_context_size_low": 0.03, "note": "x"}}`,
	}
	for _, s := range ok {
		require.NoError(t, CheckObject("model_info", gjson.Parse(s)), s)
	}
	bad := map[string]string{
		`{"input_cost_per_token": -0.5}`:   "model_info.input_cost_per_token",
		`{"output_cost_per_token": "NaN"}`: "model_info.output_cost_per_token",
		`{"input_cost_per_second": 1e999}`: "model_info.input_cost_per_second",
		`{"max_budget": "-Infinity"}`:      "model_info.max_budget",
		`{"soft_budget": "lots"}`:          "model_info.soft_budget",
		`{"tpm": -1}`:                      "model_info.tpm",
		`{"stream_timeout": true}`:         "model_info.stream_timeout",
		`{"search_context_cost_per_query": {"search_context_size_low": -1}}`: "model_info.search_context_cost_per_query.search_context_size_low",
		`{"tiered_cost": [1, "inf"]}`:                                        "model_info.tiered_cost[1]",
	}
	for s, field := range bad {
		err := CheckObject("model_info", gjson.Parse(s))
		var fe *FieldError
		require.True(t, errors.As(err, &fe), s)
		require.Equal(t, field, fe.Field, s)
	}
}

func TestOutOfRange(t *testing.T) {
	for raw, want := range map[string]bool{"1e400": true, "-1e400": true, " 1e309 ": true, "1e308": false, "1e-400": false, `"1e400"`: false, "x": false, "": false} {
		if got := OutOfRange([]byte(raw)); got != want {
			t.Errorf("OutOfRange(%q) = %v, want %v", raw, got, want)
		}
	}
	if got, want := RangeError("max_budget", []byte("1e400")), "max_budget is out of range: a number must be at most 1.7976931348623157e+308, got 1e400"; got != want {
		t.Errorf("RangeError = %q, want %q", got, want)
	}
}

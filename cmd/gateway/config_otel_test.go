package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func loadTestConfig(t *testing.T, text string) (*FileConfig, error) {
	t.Helper()
	p := filepath.Join(t.TempDir(), "config.yaml")
	require.NoError(t, os.WriteFile(p, []byte(text), 0o600))
	return loadConfig(p, nil)
}

// litellm_settings.callbacks and success_callback (a list, or one name as a string) are read:
// "otel" turns OpenTelemetry on; the section's other keys are still accepted and ignored.
func TestConfigCallbacks(t *testing.T) {
	cfg, err := loadTestConfig(t, "litellm_settings:\n  drop_params: true\n  callbacks: [\"otel\", \"langfuse\"]\n  success_callback: otel\n")
	require.NoError(t, err)
	require.Equal(t, []string{"otel", "langfuse", "otel"}, cfg.LiteLLMSettings.callbacks())

	cfg, err = loadTestConfig(t, "litellm_settings:\n  success_callback: [\"otel\"]\n")
	require.NoError(t, err)
	require.Equal(t, []string{"otel"}, cfg.LiteLLMSettings.callbacks())

	_, err = loadTestConfig(t, "litellm_settings:\n  callbacks: {otel: true}\n")
	require.ErrorContains(t, err, "litellm_settings callbacks (line 2): a list of callback names")
}

func TestConfigSpendLogLines(t *testing.T) {
	cfg, err := loadTestConfig(t, "general_settings:\n  spend_log_lines: true\n")
	require.NoError(t, err)
	require.True(t, cfg.GeneralSettings.SpendLogLines)
	cfg, err = loadTestConfig(t, "general_settings: {}\n")
	require.NoError(t, err)
	require.False(t, cfg.GeneralSettings.SpendLogLines)
}

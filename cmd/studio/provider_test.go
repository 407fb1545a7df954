package main

import (
	"strings"
	"testing"
)

func TestParseProviderSpec(t *testing.T) {
	t.Parallel()
	ps, err := parseProviderSpec("local=openai,model=llama3.1,base-url=http://x/v1,api-key-env=MY_KEY,context-tokens=8192")
	if err != nil || ps.name != "local" || ps.kind != "openai" || ps.model != "llama3.1" || ps.baseURL != "http://x/v1" ||
		ps.apiKeyEnv != "MY_KEY" || ps.contextTokens != 8192 {
		t.Fatalf("spec = %+v %v", ps, err)
	}
	for _, bad := range []string{"", "local", "=openai", "a b=openai", "x=openai,model", "x=openai,color=red", "x=openai,context-tokens=-1"} {
		if _, err := parseProviderSpec(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
	ms, err := configuredModels("claude", []string{"local=offline", "claude=anthropic,api-key-env=STUDIO_TEST_NO_SUCH_KEY"})
	if err != nil || len(ms) != 2 || ms[0].Name != "claude" || ms[1].Name != "local" {
		t.Fatalf("models = %+v %v", ms, err)
	}
	if ms, err := configuredModels("offline", []string{"offline=script"}); err != nil || len(ms) != 1 || ms[0].Kind != "script" {
		t.Errorf("--model naming an entry: %+v %v", ms, err)
	}
	if _, err := configuredModels("script:"+writeScript(t, `{"turns":[{"steps":[{"text":"x"}]}]}`), []string{"script=offline"}); err == nil {
		t.Error("a provider entry shadowing the default's name was accepted")
	}
	if _, err := configuredModels("offline", []string{"a=offline", "a=offline"}); err == nil {
		t.Error("a duplicate entry was accepted")
	}
	if _, err := configuredModels("offline", []string{"a=nonsense"}); err == nil {
		t.Error("an unknown kind was accepted")
	}
}

// TestProviderProblemNamesItsOwnURL: a --provider entry with a base-url
// of its own is judged by that URL, never by the public API's: a local
// server needs no key, and a public one without a key is named as given.
func TestProviderProblemNamesItsOwnURL(t *testing.T) { // not parallel: t.Setenv
	for _, v := range []string{"STUDIO_OPENAI_API_KEY", "OPENAI_API_KEY", "STUDIO_OPENAI_BASE_URL"} {
		t.Setenv(v, "")
	}
	ms, err := configuredModels("offline", []string{"local=openai,model=llama3.1,base-url=http://127.0.0.1:11434/v1",
		"cloud=openai,base-url=https://api.openai.com/v1/,api-key-env=STUDIO_TEST_NO_SUCH_KEY"})
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]string{}
	for _, m := range ms {
		byName[m.Name] = providerProblem(m.Provider)
	}
	if p := byName["local"]; p != "" {
		t.Errorf("the entry on a local server has a problem: %q", p)
	}
	if p := byName["cloud"]; !strings.Contains(p, "no API key for https://api.openai.com/v1") {
		t.Errorf("the entry on the public API without its key: %q", p)
	}
	for _, m := range ms {
		if m.Name == "local" && providerURL(m.Provider) != "http://127.0.0.1:11434/v1" {
			t.Errorf("the local entry's URL is %q", providerURL(m.Provider))
		}
	}
}

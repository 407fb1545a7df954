package main

import "testing"

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

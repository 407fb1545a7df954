package tools

import (
	"context"
	"time"

	"github.com/studio/operator/internal/spaces"
	"github.com/studio/operator/internal/studio"
)

// Service is the application as the whole default registry uses it.
type Service interface {
	App
	Doctor(ctx context.Context) (studio.DoctorReport, error)
}

// Default is the registry the daemon offers: cockpit, read, health and
// command tools over the application service.
func Default(svc Service, reg spaces.Registry, now func() time.Time) *Registry {
	specs := CockpitTools(reg)
	specs = append(specs, ReadTools(svc, now)...)
	specs = append(specs, Read("system_health", "System health",
		"The doctor report: database integrity and size, free space, model provider, queued and running work, proposals needing reconciliation.",
		"system.health", func(ctx context.Context, _ Env, _ NoInput) (studio.DoctorReport, error) {
			return svc.Doctor(ctx)
		}))
	specs = append(specs, CommandTools()...)
	return NewRegistry(specs...)
}

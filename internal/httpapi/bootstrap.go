package httpapi

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
)

// BootstrapActor is the audit actor of the owner's creation at first start.
const BootstrapActor = "studio_system"

// EnsureOwner makes the data directory's token the token of the bootstrap
// admin principal, owner: on the first start with principals the owner is
// created and the token's hash stored; later starts find it and change
// nothing. A token revoked since, or an owner disabled since, stays so:
// the daemon then accepts only the principals' own tokens. Daemons that
// start together on one database may both try; the loser's conflict is
// the winner's success.
func EnsureOwner(ctx context.Context, ps store.PrincipalStore, token string, now time.Time) (store.Principal, error) {
	hash := HashToken(token)
	if p, _, err := ps.Authenticate(ctx, store.AuthenticateParams{Hash: hash, Now: now}); err == nil {
		return p, nil
	} else if !protocol.IsCode(err, protocol.AuthRequired) {
		return store.Principal{}, fmt.Errorf("look the token up: %w", err)
	}
	owner, err := ps.GetPrincipal(ctx, OwnerName)
	if protocol.IsCode(err, protocol.NotFound) {
		id := uuid.NewString()
		owner, err = ps.CreatePrincipal(ctx, store.CreatePrincipalParams{ID: id, Name: OwnerName, Role: protocol.RoleAdmin, Now: now,
			Audit: &store.AppendAdminEventParams{Actor: BootstrapActor, Action: ActionPrincipalCreated, TargetID: &id,
				Details: []byte(`{"name":"owner","role":"admin","bootstrap":true}`), Now: now}})
		if protocol.IsCode(err, protocol.Conflict) {
			owner, err = ps.GetPrincipal(ctx, OwnerName)
		}
	}
	if err != nil {
		return store.Principal{}, fmt.Errorf("bootstrap owner: %w", err)
	}
	id := uuid.NewString()
	_, err = ps.CreateToken(ctx, store.CreateTokenParams{ID: id, PrincipalID: owner.ID, Hash: hash, Prefix: TokenDisplayPrefix(token), Now: now,
		Audit: &store.AppendAdminEventParams{Actor: BootstrapActor, Action: ActionTokenCreated, TargetID: &id,
			Details: []byte(`{"principal":"owner","bootstrap":true}`), Now: now}})
	if err != nil && !protocol.IsCode(err, protocol.Conflict) {
		return store.Principal{}, fmt.Errorf("bootstrap owner's token: %w", err)
	}
	return owner, nil
}

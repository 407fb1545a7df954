package httpapi

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/studio/operator/internal/principalname"
	"github.com/studio/operator/internal/protocol"
	"github.com/studio/operator/internal/store"
)

// EnsureOwner makes the data directory's token the token of the bootstrap
// admin principal, owner: on the first start with principals the owner is
// created and the token's hash stored; later starts find it and change
// nothing. A token revoked since, or an owner disabled since, stays so:
// the daemon then accepts only the principals' own tokens. Daemons that
// start together on one database may both try; the loser's conflict is
// the winner's success. The bootstrap writes no audit row: it is the
// daemon's setup, as the token file's creation is.
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
		owner, err = ps.CreatePrincipal(ctx, store.CreatePrincipalParams{ID: id, Name: OwnerName, NameKey: principalname.Skeleton(OwnerName),
			Role: protocol.RoleAdmin, Origin: protocol.OriginLocal, Now: now})
		if protocol.IsCode(err, protocol.Conflict) {
			owner, err = ps.GetPrincipal(ctx, OwnerName)
		}
	}
	if err != nil {
		return store.Principal{}, fmt.Errorf("bootstrap owner: %w", err)
	}
	_, err = ps.CreateToken(ctx, store.CreateTokenParams{ID: uuid.NewString(), PrincipalID: owner.ID, Hash: hash,
		Prefix: TokenDisplayPrefix(token), Now: now})
	if err != nil && !protocol.IsCode(err, protocol.Conflict) {
		return store.Principal{}, fmt.Errorf("bootstrap owner's token: %w", err)
	}
	return owner, nil
}

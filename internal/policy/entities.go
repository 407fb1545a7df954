package policy

import (
	cedar "github.com/cedar-policy/cedar-go"

	"github.com/studio/operator/internal/protocol"
)

// The entities of one decision: the principal (in its role and groups),
// the role ladder, the resource and, for a proposal, its conversation.

// roles is the role ladder: each role in the one below it.
var roles = func() map[cedar.EntityUID]cedar.Entity {
	out := map[cedar.EntityUID]cedar.Entity{}
	for i, r := range protocol.Roles {
		uid := roleUID(r)
		var parents cedar.EntityUIDSet
		if i > 0 {
			parents = cedar.NewEntityUIDSet(roleUID(protocol.Roles[i-1]))
		}
		out[uid] = cedar.Entity{UID: uid, Parents: parents}
	}
	return out
}()

func roleUID(r protocol.Role) cedar.EntityUID { return cedar.NewEntityUID("Role", cedar.String(r)) }

func principalUID(name string) cedar.EntityUID {
	return cedar.NewEntityUID("Principal", cedar.String(name))
}

// entities implements cedar.EntityGetter for one decision.
type entities struct {
	principal    cedar.Entity
	resource     cedar.EntityUID
	resEntity    cedar.Entity
	conversation *cedar.Entity
}

func newEntities(p protocol.Principal, r Resource) *entities {
	parents := []cedar.EntityUID{}
	if p.Role.Valid() {
		parents = append(parents, roleUID(p.Role))
	}
	for _, g := range p.Groups {
		parents = append(parents, cedar.NewEntityUID("Group", cedar.String(g)))
	}
	origin := p.Origin
	if origin == "" {
		origin = protocol.OriginLocal
	}
	e := &entities{principal: cedar.Entity{UID: principalUID(p.Name), Parents: cedar.NewEntityUIDSet(parents...),
		Attributes: cedar.NewRecord(cedar.RecordMap{
			"name": cedar.String(p.Name), "role": cedar.String(p.Role), "origin": cedar.String(origin)})}}
	switch r := r.(type) {
	case Conversation:
		e.resEntity = conversationEntity(r)
	case Proposal:
		attrs := cedar.RecordMap{
			"commandType": cedar.String(r.CommandType),
			"risk":        cedar.String(r.Risk),
			"impact":      cedar.String(impactName(r.Impact)),
			"targetKind":  cedar.String(r.TargetKind),
			"project":     cedar.String(r.Project),
		}
		var levels []cedar.Value
		for _, l := range AtLeast(r.Risk, r.Impact) {
			levels = append(levels, cedar.String(l))
		}
		attrs["atLeast"] = cedar.NewSet(levels...)
		if r.Author != "" {
			attrs["author"] = principalUID(r.Author)
		}
		if r.Conversation != nil {
			c := conversationEntity(*r.Conversation)
			e.conversation = &c
			attrs["conversation"] = c.UID
		}
		e.resEntity = cedar.Entity{UID: cedar.NewEntityUID("Proposal", cedar.String(r.ID)), Attributes: cedar.NewRecord(attrs)}
	default:
		e.resEntity = cedar.Entity{UID: cedar.NewEntityUID("Studio", cedar.String(r.ResourceID()))}
	}
	e.resource = e.resEntity.UID
	return e
}

func conversationEntity(c Conversation) cedar.Entity {
	return cedar.Entity{UID: cedar.NewEntityUID("Conversation", cedar.String(c.ID)), Attributes: cedar.NewRecord(cedar.RecordMap{
		"owner": principalUID(c.Owner), "visibility": cedar.String(c.Visibility), "project": cedar.String(c.Project)})}
}

// impactName is an impact as policies see it: "none" for none.
func impactName(impact string) string {
	if impact == "" {
		return ImpactNone
	}
	return impact
}

// Get implements cedar.EntityGetter.
func (e *entities) Get(uid cedar.EntityUID) (cedar.Entity, bool) {
	switch {
	case uid == e.principal.UID:
		return e.principal, true
	case uid == e.resource:
		return e.resEntity, true
	case e.conversation != nil && uid == e.conversation.UID:
		return *e.conversation, true
	}
	ent, ok := roles[uid]
	return ent, ok
}

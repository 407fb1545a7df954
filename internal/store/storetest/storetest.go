package storetest

import (
	"testing"

	"github.com/studio/operator/internal/store"
)

// Exercise runs the conformance suite against a backend. open must return a
// fresh, migrated store for the subtest t and close it in t.Cleanup. Every
// subtest opens its own store and most run in parallel.
func Exercise(t *testing.T, open func(t *testing.T) store.Store) {
	t.Helper()
	run := func(name string, fn func(t *testing.T, f *fixture)) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			fn(t, newFixture(t, open))
		})
	}

	run("SchemaVersion", testSchemaVersion)
	run("ScrubSecrets", testScrubSecrets)
	t.Run("App", func(t *testing.T) { ExerciseApp(t, open) })
	t.Run("Effects", func(t *testing.T) { ExerciseEffects(t, open) })
	t.Run("Proposals", func(t *testing.T) { ExerciseProposals(t, open) })
	t.Run("Engine", func(t *testing.T) { ExerciseEngine(t, open) })
	t.Run("ConversationHistory", func(t *testing.T) { ExerciseConversationHistory(t, open) })
	t.Run("Instances", func(t *testing.T) { ExerciseInstances(t, open) })
	t.Run("Fences", func(t *testing.T) { ExerciseFences(t, open) })
	t.Run("Principals", func(t *testing.T) { ExercisePrincipals(t, open) })
	t.Run("Webhooks", func(t *testing.T) { ExerciseWebhooks(t, open) })
	t.Run("Visibility", func(t *testing.T) { ExerciseVisibility(t, open) })
	t.Run("Waiting", func(t *testing.T) { ExerciseWaiting(t, open) })

	run("Conversation/CreateGet", testConversationCreateGet)
	run("Conversation/GetMissing", testConversationGetMissing)
	run("Conversation/CreateDuplicateID", testConversationCreateDuplicate)
	run("Conversation/ListStatusFilter", testConversationListStatus)
	run("Conversation/ListPaging", testConversationListPaging)
	run("Conversation/Rename", testConversationRename)
	run("Conversation/ArchiveUnarchive", testConversationArchive)
	run("Conversation/ArchiveRefusedWhileActive", testConversationArchiveActive)
	run("Conversation/UpdateRefusesDeletedStatus", testConversationUpdateBadStatus)
	run("Conversation/Delete", testConversationDelete)
	run("Conversation/DeleteRefusedWhileActive", testConversationDeleteActive)
	run("Conversation/Missing", testConversationMissing)

	run("SubmitTurn/First", testSubmitFirst)
	run("SubmitTurn/SecondActiveConflict", testSubmitActiveConflict)
	run("SubmitTurn/StaleContext", testSubmitStale)
	run("SubmitTurn/Archived", testSubmitArchived)
	run("SubmitTurn/DeletedOrMissing", testSubmitDeletedMissing)
	run("SubmitTurn/DuplicateRequestID", testSubmitDuplicateRequest)
	run("SubmitTurn/ConcurrentExactlyOne", testSubmitConcurrent)

	run("StartTurn", testStartTurn)
	run("FinishTurn/ErrorAndDone", testFinishError)
	run("FinishTurn/DoneAlone", testFinishDone)
	run("FinishTurn/Twice", testFinishTwice)
	run("FinishTurn/NotTerminal", testFinishNotTerminal)
	run("FinishTurn/Missing", testFinishMissing)

	run("RequestCancel/Queued", testCancelQueued)
	run("RequestCancel/Running", testCancelRunning)
	run("RequestCancel/By", testCancelRequestedBy)
	run("RequestCancel/Terminal", testCancelTerminal)
	run("RequestCancel/Missing", testCancelMissing)

	run("RecoverTurns", testRecoverTurns)
	run("SetTurnContext", testSetTurnContext)

	run("AppendFrames/ActiveRequest", testAppendActive)
	run("AppendFrames/Many", testAppendMany)
	run("AppendFrames/NotActive", testAppendNotActive)
	run("AppendFrames/InvalidPayload", testAppendInvalid)
	run("AppendFrames/DoneRefused", testAppendDone)
	run("AppendFrames/Concurrent", testAppendConcurrent)
	run("ListFrames/Paging", testListFramesPaging)
	run("CountFrames", testCountFrames)
	run("TurnFrames/ManyTurns", testTurnFramesManyTurns)

	run("FrameSignal/AppendWakesOnlyItsConversation", testSignalAppend)
	run("FrameSignal/TurnTransitions", testSignalTurn)
	run("Subscribe/CommittedFramesFromMemory", testSubscribe)

	run("StreamTicket/RedeemOnce", testTicketRedeemOnce)
	run("StreamTicket/KeepsItsMinter", testTicketKeepsItsMinter)
	run("StreamTicket/Expired", testTicketExpired)
	run("StreamTicket/Unknown", testTicketUnknown)
	run("StreamTicket/MissingConversation", testTicketMissingConversation)
	run("StreamTicket/ConcurrentRedeem", testTicketConcurrent)

	run("AdminEvents/AppendList", testAdminEvents)
	run("AdminEvents/Actors", testAuditActors)
}

func testSchemaVersion(t *testing.T, f *fixture) {
	v, err := f.s.SchemaVersion(f.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if v < 1 {
		t.Fatalf("SchemaVersion = %d, want a migrated store", v)
	}
}

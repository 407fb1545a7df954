package protocol

// OperatorBucket is one interval of the operator's recent activity.
type OperatorBucket struct {
	Start float64 `json:"start"`
	End   float64 `json:"end"`
	// Turns ended in the interval, Failed of them not completed, and the
	// median and slowest turn's duration (nil: none ended).
	Turns    int    `json:"turns"`
	Failed   int    `json:"failed"`
	MedianMs *int64 `json:"medianMs"`
	MaxMs    *int64 `json:"maxMs"`
	// ModelErrors counts the failed model attempts by error code.
	ModelErrors map[string]int `json:"modelErrors"`
}

// OperatorActivity (GET /api/app/system/operator) is the operator's recent turns and model failures in
// equal intervals ending now.
type OperatorActivity struct {
	Since   float64          `json:"since"`
	Until   float64          `json:"until"`
	Buckets []OperatorBucket `json:"buckets"`
	// Kept says how many turn ends and failures the rings hold: older ones
	// were dropped, and a restart forgets them all.
	Kept struct {
		Turns    int `json:"turns"`
		Failures int `json:"failures"`
	} `json:"kept"`
}

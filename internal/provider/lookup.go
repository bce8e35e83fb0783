package provider

// Lookup normalizes a provider's raw status string with its table; a string the
// table does not list is unlisted (StatusUnknown, RefundUnknown).
func Lookup[S Status | RefundStatus](table map[string]S, raw string, unlisted S) S {
	if s, ok := table[raw]; ok {
		return s
	}
	return unlisted
}

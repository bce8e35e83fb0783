package provider

import (
	"fmt"
	"strings"
)

// Lookup normalizes a provider's raw status string with its table; a string the
// table does not list is unlisted (StatusUnknown, RefundUnknown).
func Lookup[S Status | RefundStatus](table map[string]S, raw string, unlisted S) S {
	if s, ok := table[raw]; ok {
		return s
	}
	return unlisted
}

// OneMatch is the answer to a look-up by merchant reference, given the
// provider's payments that carry ref (what is one of them: "job",
// "PaymentIntent", "payment"). None is ErrNotFound. Several are a refusal,
// never the first listed: an order may be paid again after an attempt that
// ended without the money (SPEC §12.1), each attempt is its own payment at
// the provider, and which one the asking attempt made cannot be told from
// the reference (the first may be an earlier attempt's, failed, while the
// asker's own took the money). The core then asks a human rather than
// guess.
func OneMatch(provider, what, ref string, matches []Payment) (Payment, error) {
	switch len(matches) {
	case 0:
		return Payment{}, &Error{Provider: provider, Op: "find", Class: ErrNotFound, Detail: "no " + what + " with merchant reference " + ref}
	case 1:
		return matches[0], nil
	}
	ids := make([]string, len(matches))
	for i, m := range matches {
		ids[i] = m.ID
	}
	return Payment{}, &Error{Provider: provider, Op: "find", Class: ErrNonRetryable,
		Detail: fmt.Sprintf("%d %ss carry merchant reference %s (%s): one per attempt at the order, and which is this attempt's cannot be told", len(matches), what, ref, strings.Join(ids, ", "))}
}

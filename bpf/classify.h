/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Which class a packet belongs to. */
#ifndef SHAPER_CLASSIFY_H
#define SHAPER_CLASSIFY_H

#include "maps.h"

/* Returns the class id, or 0 when the packet is unclassified (passes unshaped). */
static __always_inline __u32 classify(struct __sk_buff *skb, const struct shaper_settings *settings)
{
	(void)skb;
	return settings->default_class;
}

#endif /* SHAPER_CLASSIFY_H */

/* Output injection (issue 30, defect 6): the escaping of strings from
 * outside (src/base/escape.c), in each format, against hand-written
 * results; and a buffer too small never gets half an escape or half a
 * character. */
#include <criterion/criterion.h>
#include <string.h>
#include "base/escape.h"

typedef struct {
	const char *in;
	size_t len;
	const char *text, *prom, *json;
} case_t;

#define C(s, t, p, j) {s, sizeof s - 1, t, p, j}
static const case_t cases[] = {
    C("plain: a-z 0-9 {}", "plain: a-z 0-9 {}", "plain: a-z 0-9 {}",
      "plain: a-z 0-9 {}"),
    C("q\"b\\", "q\"b\\\\", "q\\\"b\\\\\\\\", "q\\\"b\\\\"),
    C("\x1b[2J\n\r\t\a", "\\x1b[2J\\x0a\\x0d\\x09\\x07",
      "\\\\x1b[2J\\\\x0a\\\\x0d\\\\x09\\\\x07",
      "\\u001b[2J\\u000a\\u000d\\u0009\\u0007"),
    C("\x7f", "\\x7f", "\\\\x7f", "\\u007f"),
    C("\x00z", "\\x00z", "\\\\x00z", "\\u0000z"),
    /* C1 controls, well-formed UTF-8 but controls: CSI U+009B, U+0080. */
    C("\xc2\x9b\xc2\x80", "\\xc2\\x9b\\xc2\\x80",
      "\\\\xc2\\\\x9b\\\\xc2\\\\x80", "\\u009b\\u0080"),
    /* Characters: U+00A0, U+00E9, U+20AC, U+FFFD, U+1F600, U+10FFFF. */
    C("\xc2\xa0\xc3\xa9\xe2\x82\xac\xef\xbf\xbd\xf0\x9f\x98\x80\xf4\x8f"
      "\xbf\xbf", "\xc2\xa0\xc3\xa9\xe2\x82\xac\xef\xbf\xbd\xf0\x9f\x98\x80"
      "\xf4\x8f\xbf\xbf", "\xc2\xa0\xc3\xa9\xe2\x82\xac\xef\xbf\xbd\xf0\x9f"
      "\x98\x80\xf4\x8f\xbf\xbf", "\xc2\xa0\xc3\xa9\xe2\x82\xac\xef\xbf\xbd"
      "\xf0\x9f\x98\x80\xf4\x8f\xbf\xbf"),
    /* Not UTF-8: a lone continuation, an overlong '/', a surrogate, past
     * U+10FFFF, 0xfe 0xff, a character cut short: each byte on its own. */
    C("\x80\xc0\xaf\xed\xa0\x80\xf4\x90\x80\x80\xfe\xff\xe2\x82",
      "\\x80\\xc0\\xaf\\xed\\xa0\\x80\\xf4\\x90\\x80\\x80\\xfe\\xff\\xe2\\x82",
      "\\\\x80\\\\xc0\\\\xaf\\\\xed\\\\xa0\\\\x80\\\\xf4\\\\x90\\\\x80\\\\x80"
      "\\\\xfe\\\\xff\\\\xe2\\\\x82",
      "\\ufffd\\ufffd\\ufffd\\ufffd\\ufffd\\ufffd\\ufffd\\ufffd\\ufffd"
      "\\ufffd\\ufffd\\ufffd\\ufffd\\ufffd"),
    /* A cut character before a good one: the good one kept. */
    C("\xe2\x82" "A\xc3", "\\xe2\\x82A\\xc3", "\\\\xe2\\\\x82A\\\\xc3",
      "\\ufffd\\ufffdA\\ufffd"),
};

Test(escape, output_injection_each_format) {
	static const hp_esc_t how[] = {HP_ESC_TEXT, HP_ESC_PROM, HP_ESC_JSON};
	for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
		for (int h = 0; h < 3; h++) {
			const case_t *c = &cases[i];
			const char *want = h == 0 ? c->text : h == 1 ? c->prom : c->json;
			char out[512];
			size_t n, took = hp_escape(how[h], c->in, c->len, out,
			    sizeof out, &n);
			cr_assert_eq(took, c->len, "case %zu format %d", i, h);
			cr_assert_eq(n, strlen(want), "case %zu format %d: %s", i, h,
			    out);
			cr_assert_str_eq(out, want, "case %zu format %d", i, h);
		}
}

/* Every size of buffer: what is written is a prefix of the whole result
 * that ends where a character of the input does, and taking on from
 * there gives the rest. */
Test(escape, output_injection_never_half_an_escape) {
	static const char in[] = "a\x1b\xc3\xa9\"\\\xff\xe2\x82\xac\n";
	static const hp_esc_t how[] = {HP_ESC_TEXT, HP_ESC_PROM, HP_ESC_JSON};
	for (int h = 0; h < 3; h++) {
		char whole[256];
		size_t wn;
		hp_escape(how[h], in, sizeof in - 1, whole, sizeof whole, &wn);
		for (size_t size = 1; size < wn + 2; size++) {
			char out[256] = "", part[16];
			size_t o = 0;
			for (size_t i = 0; i < sizeof in - 1;) {
				size_t n, took = hp_escape(how[h], in + i,
				    sizeof in - 1 - i, part, size < sizeof part ? size :
				    sizeof part, &n);
				cr_assert_lt(n, size);
				cr_assert_eq(part[n], '\0');
				if (took == 0) {       /* too small for the next one */
					cr_assert_lt(size, 12, "size %zu", size);
					break;
				}
				memcpy(out + o, part, n);
				o += n;
				i += took;
			}
			cr_assert(strncmp(out, whole, o) == 0, "format %d size %zu: %s",
			    h, size, out);
		}
	}
}

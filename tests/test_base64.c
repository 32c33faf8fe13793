#include "vlmload/base64.h"
#include "vlmload/common.h"

#include "task.h"

static void random_bytes(uint8_t *buf, size_t n, uint64_t *seed) {
  for (size_t i = 0; i < n; i++)
    buf[i] = (uint8_t)task_rand(seed);
}

/* Decodes a NUL-terminated string into a fresh buffer; returns the result of the decoder. */
static long decode_str(const char *s, uint8_t **out) {
  size_t n = strlen(s);
  *out = vl_xmalloc(n / 4 * 3 + 1);
  return vl_base64_decode(*out, s, n);
}

static void expect_rejected(const char *s) {
  uint8_t *out;
  long rc = decode_str(s, &out);
  if (rc != -1)
    fprintf(stderr, "accepted \"%s\"\n", s);
  ASSERT_INT_EQ(rc, -1);
  free(out);
}

TEST_IMPL(base64_rfc4648_vectors) {
  static const struct {
    const char *raw, *enc;
  } v[] = {
      {"", ""},
      {"f", "Zg=="},
      {"fo", "Zm8="},
      {"foo", "Zm9v"},
      {"foob", "Zm9vYg=="},
      {"fooba", "Zm9vYmE="},
      {"foobar", "Zm9vYmFy"},
  };
  for (size_t i = 0; i < VL_ARRAY_SIZE(v); i++) {
    size_t n = strlen(v[i].raw);
    char enc[16];
    ASSERT_UINT_EQ(vl_base64_encoded_len(n), strlen(v[i].enc));
    ASSERT_UINT_EQ(vl_base64_encode(enc, (const uint8_t *)v[i].raw, n), strlen(v[i].enc));
    ASSERT_MEM_EQ(enc, v[i].enc, strlen(v[i].enc));
    uint8_t *out;
    ASSERT_INT_EQ(decode_str(v[i].enc, &out), (long)n);
    ASSERT_MEM_EQ(out, v[i].raw, n);
    free(out);
  }
}

TEST_IMPL(base64_alphabet) {
  /* 0x00 0x10 0x83 0x10 0x51 0x87 ... walks every 6-bit value once: the encoding is the alphabet.
   */
  static const char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  uint8_t raw[48];
  uint8_t *out;
  ASSERT_INT_EQ(decode_str(alphabet, &out), 48);
  memcpy(raw, out, 48);
  free(out);
  char enc[64];
  ASSERT_UINT_EQ(vl_base64_encode(enc, raw, 48), 64);
  ASSERT_MEM_EQ(enc, alphabet, 64);
  ASSERT_INT_EQ(raw[0], 0x00);
  ASSERT_INT_EQ(raw[1], 0x10);
  ASSERT_INT_EQ(raw[2], 0x83);
  ASSERT_INT_EQ(raw[45], 0xf3);
  ASSERT_INT_EQ(raw[46], 0xdf);
  ASSERT_INT_EQ(raw[47], 0xbf);
}

/* Round trip of every length 0..300 and a few large ones, with random content. */
TEST_IMPL(base64_round_trip) {
  uint64_t seed = 99;
  static const size_t large[] = {4096, 65535, 65536, 65537, 1 << 20, (1 << 20) + 1, (1 << 20) + 2};
  size_t max = large[VL_ARRAY_SIZE(large) - 1];
  uint8_t *raw = vl_xmalloc(max), *back = vl_xmalloc(max + 3);
  char *enc = vl_xmalloc(vl_base64_encoded_len(max));
  for (size_t k = 0; k <= 300 + VL_ARRAY_SIZE(large); k++) {
    size_t n = k <= 300 ? k : large[k - 301];
    for (int rep = 0; rep < (n <= 300 ? 8 : 1); rep++) {
      random_bytes(raw, n, &seed);
      size_t e = vl_base64_encode(enc, raw, n);
      ASSERT_UINT_EQ(e, vl_base64_encoded_len(n));
      ASSERT_UINT_EQ(e % 4, 0);
      ASSERT_INT_EQ(vl_base64_decode(back, enc, e), (long)n);
      ASSERT_MEM_EQ(back, raw, n);
    }
  }
  free(raw);
  free(back);
  free(enc);
}

/* Reads a whole stream into a growing buffer. */
static uint8_t *slurp(FILE *f, size_t *len) {
  size_t cap = 1 << 16, n = 0;
  uint8_t *buf = vl_xmalloc(cap);
  size_t got;
  while ((got = fread(buf + n, 1, cap - n, f)) > 0) {
    n += got;
    if (n == cap)
      buf = vl_xrealloc(buf, cap *= 2);
  }
  *len = n;
  return buf;
}

static char *temp_file(const void *data, size_t n) {
  char path[600];
  snprintf(path, sizeof(path), "%s/vlmload-b64-XXXXXX", task_tmpdir());
  int fd = mkstemp(path);
  ASSERT(fd >= 0);
  ASSERT(write(fd, data, n) == (ssize_t)n);
  ASSERT(close(fd) == 0);
  return vl_xstrdup(path);
}

static uint8_t *run_base64(const char *args, const char *path, size_t *len) {
  char cmd[1024];
  snprintf(cmd, sizeof(cmd), "base64 %s < '%s'", args, path);
  FILE *f = popen(cmd, "r");
  ASSERT(f != NULL);
  uint8_t *out = slurp(f, len);
  ASSERT_INT_EQ(pclose(f), 0);
  return out;
}

/* coreutils' base64 as the reference, on about a megabyte of random bytes: it decodes what we
 * encode, encodes what we decode, and our decoder agrees with it. */
TEST_IMPL(base64_coreutils_reference) {
  if (system("base64 --version > /dev/null 2>&1") != 0) {
    fprintf(stderr, "base64_coreutils_reference: no base64 program; skipped\n");
    return;
  }
  uint64_t seed = 2024;
  const size_t n = (1 << 20) + 7;
  uint8_t *raw = vl_xmalloc(n), *back = vl_xmalloc(n + 3);
  random_bytes(raw, n, &seed);
  char *enc = vl_xmalloc(vl_base64_encoded_len(n));
  size_t e = vl_base64_encode(enc, raw, n);

  char *enc_path = temp_file(enc, e), *raw_path = temp_file(raw, n);
  size_t len;
  uint8_t *ref_dec = run_base64("-d", enc_path, &len);
  ASSERT_UINT_EQ(len, n);
  ASSERT_MEM_EQ(ref_dec, raw, n);

  uint8_t *ref_enc = run_base64("-w 0", raw_path, &len);
  ASSERT_UINT_EQ(len, e);
  ASSERT_MEM_EQ(ref_enc, enc, e);
  ASSERT_INT_EQ(vl_base64_decode(back, (const char *)ref_enc, len), (long)n);
  ASSERT_MEM_EQ(back, ref_dec, n);

  unlink(enc_path);
  unlink(raw_path);
  free(enc_path);
  free(raw_path);
  free(ref_dec);
  free(ref_enc);
  free(raw);
  free(back);
  free(enc);
}

TEST_IMPL(base64_bad_chars) {
  static const char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  /* Every byte outside the alphabet, at every position of an inner and of the final quartet ('='
   * included: "QUJDRE=G" pads wrongly, "QUJDREV=" leaves pad bits set). */
  for (int c = 1; c < 256; c++) {
    if (memchr(alphabet, c, 64))
      continue;
    for (int pos = 0; pos < 8; pos++) {
      char s[9] = "QUJDREVG";
      s[pos] = (char)c;
      expect_rejected(s);
    }
  }
  /* NUL inside the input is a bad character too. */
  uint8_t out[6];
  ASSERT_INT_EQ(vl_base64_decode(out, "QU\0DREVG", 8), -1);
  expect_rejected("Zm9v\n");
  expect_rejected("Zm 9v");
  expect_rejected(" Zm9v");
  expect_rejected("Zm9-");
  expect_rejected("Zm9_");
}

TEST_IMPL(base64_bad_length) {
  expect_rejected("Z");
  expect_rejected("Zm");
  expect_rejected("Zm9");
  expect_rejected("Zm9vY");
  expect_rejected("Zm9vYg");
  expect_rejected("Zm9vYg=");
  expect_rejected("Zm9vYg===");
}

TEST_IMPL(base64_bad_padding) {
  expect_rejected("====");
  expect_rejected("A===");
  expect_rejected("=AAA");
  expect_rejected("AA=A");
  expect_rejected("A=AA");
  expect_rejected("Zg==Zm9v"); /* padding before the last quartet */
  expect_rejected("Zm8=Zm9v");
  expect_rejected("Zg==Zg==");
}

/* The bits below the last whole byte must be zero, or two encodings would decode alike. */
TEST_IMPL(base64_nonzero_pad_bits) {
  uint8_t *out;
  ASSERT_INT_EQ(decode_str("Zg==", &out), 1);
  free(out);
  ASSERT_INT_EQ(decode_str("Zm8=", &out), 2);
  free(out);
  static const char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  for (int v = 0; v < 64; v++) {
    char one[5] = {'Z', alphabet[v], '=', '=', 0};
    char two[5] = {'Z', 'm', alphabet[v], '=', 0};
    long rc = decode_str(one, &out);
    free(out);
    ASSERT_INT_EQ(rc, (v & 15) ? -1 : 1);
    rc = decode_str(two, &out);
    free(out);
    ASSERT_INT_EQ(rc, (v & 3) ? -1 : 2);
  }
}

static const task_entry_t tests[] = {
    TEST_ENTRY(base64_rfc4648_vectors), TEST_ENTRY(base64_alphabet),
    TEST_ENTRY(base64_round_trip),      TEST_ENTRY(base64_coreutils_reference),
    TEST_ENTRY(base64_bad_chars),       TEST_ENTRY(base64_bad_length),
    TEST_ENTRY(base64_bad_padding),     TEST_ENTRY(base64_nonzero_pad_bits),
};

int main(int argc, char **argv) {
  return run_tests(tests, VL_ARRAY_SIZE(tests), argc, argv);
}

/* arraybridge-info: every backend (found or not, and why), every device with its
 * DLDevice, name, memory and host sharing, and the pinned pool. --json for machines. */
#include <stdio.h>
#include <string.h>

#include <arraybridge/arraybridge.h>

/* The backends, from the library's table of device kinds: each backend once, the host first. */
#define MAX_BACKENDS 16
static abr_backend backend_ids[MAX_BACKENDS];
static char backend_names[MAX_BACKENDS][32];
static int backend_count = 0;

static void load_backends(void) {
  int32_t kinds = 0, k, b;
  abr_device_kind_count(&kinds);
  for (k = 0; k < kinds && backend_count < MAX_BACKENDS; ++k) {
    abr_device_kind kind = ABR_DEVICE_KIND_INIT;
    if (abr_device_kind_get(k, &kind) != ABR_OK) continue;
    for (b = 0; b < backend_count && backend_ids[b] != kind.backend; ++b) {
    }
    if (b < backend_count) continue;
    backend_ids[backend_count] = kind.backend;
    memcpy(backend_names[backend_count], kind.backend_name, sizeof kind.backend_name);
    ++backend_count;
  }
}

static const char* backend_name(abr_backend id) {
  int b;
  for (b = 0; b < backend_count; ++b)
    if (backend_ids[b] == id) return backend_names[b];
  return "unknown";
}

/* The length of the well-formed UTF-8 character at s (1 to 4), or 0 if s does not
 * start one (a stray continuation byte, an overlong form, a surrogate, past U+10FFFF,
 * or cut short). */
static int utf8_length(const unsigned char* s) {
  int length, i;
  unsigned long code;
  if (s[0] < 0x80) return 1;
  if (s[0] >= 0xc2 && s[0] <= 0xdf)
    length = 2, code = s[0] & 0x1fu;
  else if (s[0] >= 0xe0 && s[0] <= 0xef)
    length = 3, code = s[0] & 0x0fu;
  else if (s[0] >= 0xf0 && s[0] <= 0xf4)
    length = 4, code = s[0] & 0x07u;
  else
    return 0;
  for (i = 1; i < length; ++i) {
    if ((s[i] & 0xc0u) != 0x80u) return 0; /* the NUL ends it too */
    code = (code << 6) | (s[i] & 0x3fu);
  }
  if (length == 3 && (code < 0x800 || (code >= 0xd800 && code <= 0xdfff))) return 0;
  if (length == 4 && (code < 0x10000 || code > 0x10ffff)) return 0;
  return length;
}

/* Text output fits this many columns, whatever the terminal. */
#define WIDTH 100

/* Writes text starting at column `column`, broken at blanks so that no line passes
 * WIDTH columns; continuation lines start at column `indent`. A word longer than a
 * line is cut where the line ends. Columns count UTF-8 characters, not bytes. */
static void print_wrapped(const char* text, int column, int indent) {
  const char* s = text;
  int first = 1;
  while (*s) {
    const char* end;
    int columns = 0;
    while (*s == ' ') ++s;
    if (!*s) break;
    for (end = s; *end && *end != ' '; ++end) columns += ((unsigned char)*end & 0xc0u) != 0x80u;
    if (!first && column + 1 + columns > WIDTH) {
      printf("\n%*s", indent, "");
      column = indent;
    } else if (!first) {
      putchar(' ');
      ++column;
    }
    for (; s < end; ++s) { /* a word longer than a line (a path) goes on over the next lines */
      const int starts_character = ((unsigned char)*s & 0xc0u) != 0x80u;
      if (starts_character && column >= WIDTH) {
        printf("\n%*s", indent, "");
        column = indent;
      }
      putchar(*s);
      column += starts_character;
    }
    first = 0;
  }
  putchar('\n');
}

/* Writes s, all of it, as a JSON string: quotes, backslashes and control characters
 * escaped, UTF-8 as it is, and each byte that is not UTF-8 (a driver's Latin-1, a
 * path) as U+FFFD, so the output is always valid UTF-8 JSON. */
static void json_string(const char* text) {
  const unsigned char* s = (const unsigned char*)text;
  putchar('"');
  while (*s) {
    const int length = utf8_length(s);
    if (length == 0) {
      fputs("\\ufffd", stdout);
      ++s;
    } else if (length > 1) {
      fwrite(s, 1, (size_t)length, stdout);
      s += length;
    } else {
      if (*s == '"' || *s == '\\')
        printf("\\%c", *s);
      else if (*s < 0x20 || *s == 0x7f)
        printf("\\u%04x", *s);
      else
        putchar(*s);
      ++s;
    }
  }
  putchar('"');
}

static const char* const kUsage =
    "usage: arraybridge-info [--json]\n"
    "  Lists every backend (found or not, and why), every device and the pinned pool.\n"
    "  --json      the same as one JSON object\n"
    "  -h, --help  this text\n";

static double gib(uint64_t bytes) { return (double)bytes / (1024.0 * 1024.0 * 1024.0); }

static void print_pool(abr_runtime* rt, int json) {
  abr_pool_stats s = ABR_POOL_STATS_INIT;
  memset(&s, 0, sizeof s);
  s.version = ABR_POOL_STATS_VERSION;
  if (abr_pool_get_stats(rt, &s) != ABR_OK) {
    fprintf(stderr, "arraybridge-info: %s\n", abr_last_error());
    return;
  }
  if (json) {
    printf(
        ", \"pinned_pool\": {\"bytes_pinned\": %llu, \"bytes_in_use\": %llu, \"bytes_cached\": %llu, "
        "\"bytes_waiting\": %llu, \"peak_bytes_pinned\": %llu, \"limit_bytes\": %llu, \"blocks_pinned\": %llu, "
        "\"hits\": %llu, \"misses\": %llu}",
        (unsigned long long)s.bytes_pinned, (unsigned long long)s.bytes_in_use, (unsigned long long)s.bytes_cached,
        (unsigned long long)s.bytes_waiting, (unsigned long long)s.peak_bytes_pinned, (unsigned long long)s.limit_bytes,
        (unsigned long long)s.blocks_pinned, (unsigned long long)s.hits, (unsigned long long)s.misses);
  } else {
    char line[512];
    snprintf(line, sizeof line,
             "%.2f GiB pinned in %llu blocks (%.2f GiB in use, %.2f GiB cached, %.2f GiB of it waiting on streams), "
             "peak %.2f GiB, limit %.2f GiB; %llu hits, %llu misses",
             gib(s.bytes_pinned), (unsigned long long)s.blocks_pinned, gib(s.bytes_in_use), gib(s.bytes_cached),
             gib(s.bytes_waiting), gib(s.peak_bytes_pinned), gib(s.limit_bytes), (unsigned long long)s.hits,
             (unsigned long long)s.misses);
    printf("\nPinned host pool (this process's runtime):\n  ");
    print_wrapped(line, 2, 2);
  }
}

int main(int argc, char** argv) {
  abr_runtime* rt = NULL;
  int json = 0, i;
  int32_t count = 0;

  for (i = 1; i < argc; ++i) {
    if (strcmp(argv[i], "--json") == 0) {
      json = 1;
    } else if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
      fputs(kUsage, stdout);
      return 0;
    } else {
      fprintf(stderr, "arraybridge-info: %s '%s'\n%s", argv[i][0] == '-' ? "unknown option" : "unexpected argument",
              argv[i], kUsage);
      return 2;
    }
  }
  if (abr_runtime_create(NULL, &rt) != ABR_OK || abr_device_count(rt, &count) != ABR_OK) {
    fprintf(stderr, "arraybridge-info: %s\n", abr_last_error());
    abr_runtime_destroy(rt);
    return 1;
  }

  if (json)
    printf("{\"version\": \"%s\", \"backends\": [", abr_version_string());
  else
    printf("libarraybridge %s\n\nBackends:\n", abr_version_string());
  load_backends();
  for (i = 0; i < backend_count; ++i) {
    struct abr_backend_info b = ABR_BACKEND_INFO_INIT;
    if (abr_backend_info(rt, backend_ids[i], &b) != ABR_OK) continue;
    if (json) {
      printf("%s{\"backend\": \"%s\", \"available\": %s, \"devices\": %d, \"detail\": ", i ? ", " : "",
             backend_name(b.backend), b.available ? "true" : "false", b.device_count);
      json_string(b.detail);
      printf("}");
    } else {
      printf("  %-7s %-12s ", backend_name(b.backend), b.available ? "available" : "unavailable");
      print_wrapped(b.detail, 23, 23);
    }
  }

  if (json)
    printf("], \"devices\": [");
  else
    printf("\nDevices:\n  %-5s %-12s %-8s %10s  %-6s %s\n", "index", "DLDevice", "backend", "memory", "shares",
           "name, then platform");
  for (i = 0; i < count; ++i) {
    struct abr_device_info d = ABR_DEVICE_INFO_INIT;
    if (abr_device_info(rt, i, &d) != ABR_OK) continue;
    if (json) {
      printf(
          "%s{\"index\": %d, \"device_type\": %d, \"device_id\": %d, \"backend\": \"%s\", \"memory_bytes\": %llu, "
          "\"shares_host_memory\": %s, \"lost\": %s, \"name\": ",
          i ? ", " : "", i, (int)d.device.device_type, d.device.device_id, backend_name(d.backend),
          (unsigned long long)d.memory_bytes, (d.flags & ABR_DEVICE_SHARES_HOST_MEMORY) ? "true" : "false",
          (d.flags & ABR_DEVICE_LOST_FLAG) ? "true" : "false");
      json_string(d.name);
      printf(", \"platform\": ");
      json_string(d.platform);
      printf("}");
    } else {
      char dl[32];
      snprintf(dl, sizeof dl, "(%d, %d)", (int)d.device.device_type, d.device.device_id);
      char name[sizeof d.name + 16];
      snprintf(name, sizeof name, "%s%s", d.name, (d.flags & ABR_DEVICE_LOST_FLAG) ? " [LOST]" : "");
      printf("  %-5d %-12s %-8s %7.1f GiB  %-6s ", i, dl, backend_name(d.backend), gib(d.memory_bytes),
             (d.flags & ABR_DEVICE_SHARES_HOST_MEMORY) ? "yes" : "no");
      print_wrapped(name, 52, 52);
      printf("%*s", 52, "");
      print_wrapped(d.platform, 52, 52); /* a driver's platform string runs to 200 columns: its own lines */
    }
  }
  if (json) printf("]");
  print_pool(rt, json);
  if (json) printf("}\n");
  abr_runtime_destroy(rt);
  return 0;
}

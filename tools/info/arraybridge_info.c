/* arraybridge-info: every backend (found or not, and why), every device with its
 * DLDevice, name, memory and host sharing, and the pinned pool. --json for machines. */
#include <stdio.h>
#include <string.h>

#include <arraybridge/arraybridge.h>

static const char* backend_name(abr_backend b) {
  switch (b) {
    case ABR_BACKEND_HOST: return "host";
    case ABR_BACKEND_CUDA: return "cuda";
    case ABR_BACKEND_OPENCL: return "opencl";
    default: return "unknown";
  }
}

/* Writes s as a JSON string (quotes, backslashes and control characters escaped). */
static void json_string(const char* s) {
  putchar('"');
  for (; *s; ++s) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\') printf("\\%c", c);
    else if (c < 0x20) printf("\\u%04x", c);
    else putchar(c);
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
    printf(", \"pinned_pool\": {\"bytes_pinned\": %llu, \"bytes_in_use\": %llu, \"bytes_cached\": %llu, "
           "\"peak_bytes_pinned\": %llu, \"limit_bytes\": %llu, \"blocks_pinned\": %llu, \"hits\": %llu, "
           "\"misses\": %llu}",
           (unsigned long long)s.bytes_pinned, (unsigned long long)s.bytes_in_use,
           (unsigned long long)s.bytes_cached, (unsigned long long)s.peak_bytes_pinned,
           (unsigned long long)s.limit_bytes, (unsigned long long)s.blocks_pinned, (unsigned long long)s.hits,
           (unsigned long long)s.misses);
  } else {
    printf("\nPinned host pool (this process's runtime):\n  %.2f GiB pinned in %llu blocks (%.2f GiB in use, "
           "%.2f GiB cached), peak %.2f GiB, limit %.2f GiB; %llu hits, %llu misses\n",
           gib(s.bytes_pinned), (unsigned long long)s.blocks_pinned, gib(s.bytes_in_use), gib(s.bytes_cached),
           gib(s.peak_bytes_pinned), gib(s.limit_bytes), (unsigned long long)s.hits, (unsigned long long)s.misses);
  }
}

int main(int argc, char** argv) {
  abr_runtime* rt = NULL;
  int json = 0, i;
  int32_t count = 0;
  const abr_backend backends[3] = {ABR_BACKEND_HOST, ABR_BACKEND_CUDA, ABR_BACKEND_OPENCL};

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

  if (json) printf("{\"version\": \"%s\", \"backends\": [", abr_version_string());
  else printf("libarraybridge %s\n\nBackends:\n", abr_version_string());
  for (i = 0; i < 3; ++i) {
    struct abr_backend_info b = ABR_BACKEND_INFO_INIT;
    if (abr_backend_info(rt, backends[i], &b) != ABR_OK) continue;
    if (json) {
      printf("%s{\"backend\": \"%s\", \"available\": %s, \"devices\": %d, \"detail\": ", i ? ", " : "",
             backend_name(b.backend), b.available ? "true" : "false", b.device_count);
      json_string(b.detail);
      printf("}");
    } else {
      printf("  %-7s %-12s %s\n", backend_name(b.backend), b.available ? "available" : "unavailable", b.detail);
    }
  }

  if (json) printf("], \"devices\": [");
  else printf("\nDevices:\n  %-5s %-12s %-8s %10s  %-6s %s\n", "index", "DLDevice", "backend", "memory", "shares", "name / platform");
  for (i = 0; i < count; ++i) {
    struct abr_device_info d = ABR_DEVICE_INFO_INIT;
    if (abr_device_info(rt, i, &d) != ABR_OK) continue;
    if (json) {
      printf("%s{\"index\": %d, \"device_type\": %d, \"device_id\": %d, \"backend\": \"%s\", \"memory_bytes\": %llu, "
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
      printf("  %-5d %-12s %-8s %7.1f GiB  %-6s %s / %s%s\n", i, dl, backend_name(d.backend),
             gib(d.memory_bytes),
             (d.flags & ABR_DEVICE_SHARES_HOST_MEMORY) ? "yes" : "no", d.name, d.platform,
             (d.flags & ABR_DEVICE_LOST_FLAG) ? " [LOST]" : "");
    }
  }
  if (json) printf("]");
  print_pool(rt, json);
  if (json) printf("}\n");
  abr_runtime_destroy(rt);
  return 0;
}

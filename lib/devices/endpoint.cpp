#include "lib/devices/endpoint.hpp"

namespace abr {

Endpoint describe_endpoint(const DeviceRegistry& devices, DLDevice device, const char* what, bool must_exist) {
  Endpoint side;
  side.device = device;
  side.kind = find_kind(device.device_type);
  side.host = side.kind && side.kind->host_memory;
  // require() names a kind without a row, or a device the registry lacks, and why.
  side.info = !side.kind || must_exist || !side.host ? &devices.require(device, what) : devices.find(device);
  side.shares_host_memory = side.info && (side.info->flags & ABR_DEVICE_SHARES_HOST_MEMORY);
  side.no_double_precision = side.info && (side.info->flags & ABR_DEVICE_NO_DOUBLE_PRECISION);
  return side;
}

}  // namespace abr

// module_images: every module's cubin as CUPTI hands it over at load (CUPTI_CBID_RESOURCE_MODULE_LOADED), searched
// by kernel name for graph files.
#include "conveyor/profile/module_images.hpp"

#include "conveyor/profile/profiler.hpp"

#include <cupti.h>
#include <fmt/format.h>

#include <algorithm>
#include <mutex>
#include <string>
#include <vector>

namespace conveyor::profile {

struct module_images::state {
  mutable std::mutex mutex;
  std::vector<std::pair<std::uint32_t, std::vector<unsigned char>>> images; // (CUPTI module id, cubin)
  CUpti_SubscriberHandle subscriber = nullptr;
};

namespace {

void check(CUptiResult rc, const char* call) {
  if (rc == CUPTI_SUCCESS) return;
  const char* text = nullptr;
  if (cuptiGetResultString(rc, &text) != CUPTI_SUCCESS || text == nullptr) text = "unknown CUPTI error";
  throw profiler_error(fmt::format("conveyor::profile::module_images: {} failed: {}{}", call, text,
                                   rc == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED
                                       ? " (another CUPTI tool or module_images is attached to the process)"
                                       : ""));
}

// The module a module-loaded callback reports, when it has a cubin; null for other callbacks.
const CUpti_ModuleResourceData* loaded_cubin(CUpti_CallbackDomain domain, CUpti_CallbackId id, const void* data) {
  if (domain != CUPTI_CB_DOMAIN_RESOURCE || id != CUPTI_CBID_RESOURCE_MODULE_LOADED) return nullptr;
  const auto* r = static_cast<const CUpti_ResourceData*>(data);
  const auto* m = static_cast<const CUpti_ModuleResourceData*>(r->resourceDescriptor);
  if (m == nullptr || m->pCubin == nullptr || m->cubinSize == 0) return nullptr;
  return m;
}

void CUPTIAPI on_resource(void* user, CUpti_CallbackDomain domain, CUpti_CallbackId id, const void* data) {
  const CUpti_ModuleResourceData* m = loaded_cubin(domain, id, data);
  if (m == nullptr) return;
  auto* s = static_cast<module_images::state*>(user);
  try {
    std::vector<unsigned char> bytes(m->pCubin, m->pCubin + m->cubinSize);
    std::lock_guard lock(s->mutex);
    s->images.emplace_back(m->moduleId, std::move(bytes));
  } catch (...) { // std::bad_alloc: the module is not recorded (its kernels then resolve through a registry)
  }
}

// True when the image's string table holds `name` as a whole symbol name ("\0name\0").
bool defines(const std::vector<unsigned char>& image, std::string_view name) {
  std::string needle(1, '\0');
  needle.append(name);
  needle.push_back('\0');
  return std::search(image.begin(), image.end(), needle.begin(), needle.end()) != image.end();
}

} // namespace

module_images::module_images() : state_(std::make_shared<state>()) {
  check(cuptiSubscribe(&state_->subscriber, reinterpret_cast<CUpti_CallbackFunc>(&on_resource), state_.get()),
        "cuptiSubscribe");
  const CUptiResult rc =
      cuptiEnableCallback(1, state_->subscriber, CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_MODULE_LOADED);
  if (rc != CUPTI_SUCCESS) {
    (void)cuptiUnsubscribe(state_->subscriber);
    check(rc, "cuptiEnableCallback(CUPTI_CBID_RESOURCE_MODULE_LOADED)");
  }
}

module_images::~module_images() { (void)cuptiUnsubscribe(state_->subscriber); }

std::optional<saved_image> module_images::image_of(std::string_view mangled_name, CUfunction) const {
  std::lock_guard lock(state_->mutex);
  for (auto it = state_->images.rbegin(); it != state_->images.rend(); ++it)
    if (defines(it->second, mangled_name))
      return saved_image{image_format::cubin, fmt::format("CUPTI module {}", it->first), it->second};
  return std::nullopt;
}

std::size_t module_images::modules() const {
  std::lock_guard lock(state_->mutex);
  return state_->images.size();
}

std::size_t module_images::bytes() const {
  std::lock_guard lock(state_->mutex);
  std::size_t n = 0;
  for (const auto& [id, b] : state_->images) n += b.size();
  return n;
}

} // namespace conveyor::profile

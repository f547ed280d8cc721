// Must compile: the same argument wrapped in conveyor::unkeyed, and with a key function.
#include <conveyor/assembly/graphed.hpp>

#include <cstdint>
#include <string>

void use(const conveyor::stream& s) {
  conveyor::graphed run([](const conveyor::stream&, const std::string&) {});
  run(s, conveyor::unkeyed{std::string("a name")});
  conveyor::graphed keyed([](const conveyor::stream&, const std::string&) {}, {},
                          [](const std::string& name) { return static_cast<std::uint64_t>(name.size()); });
  keyed(s, std::string("a name"));
}

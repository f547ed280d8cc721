// Must NOT compile: graphed cannot tell whether a std::string argument changed between calls, so it refuses the
// type at compile time (wrap it in conveyor::unkeyed or give a key function). Checked by CTest (tests/CMakeLists.txt).
#include <conveyor/assembly/graphed.hpp>

#include <string>

void use(const conveyor::stream& s) {
  conveyor::graphed run([](const conveyor::stream&, const std::string&) {});
  run(s, std::string("a name"));
}

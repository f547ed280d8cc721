// Compiled as C++17: refused with one message saying Conveyor needs C++20.
#include <conveyor/conveyor.hpp>

int main() {}

/* refgate-run: placeholder until the sandbox runner lands. */
#include <stdio.h>

int main(void)
{
    fprintf(stderr, "refgate-run: not built yet\n");
    return 2;
}

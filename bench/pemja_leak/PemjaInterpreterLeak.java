// What one pemja interpreter leaves behind once closed (issue 37): bench/pemja_leak.py runs it.

import pemja.core.PythonInterpreter;
import pemja.core.PythonInterpreterConfig;

public class PemjaInterpreterLeak {
    /** A Java object as PyFlink hands its contexts to Python: one overloaded method. */
    public static class Context {
        public int emit(int value) {
            return value;
        }

        public String emit(String value) {
            return value;
        }
    }

    private static final String COUNT =
            "import gc, sys\n"
                    + "method_lists = sum(1 for o in gc.get_objects() if type(o) is list and o"
                    + " and all(type(m).__name__ == 'PyJMethod' for m in o))\n"
                    + "pemja_modules = sum(1 for o in gc.get_objects()"
                    + " if type(o).__name__ == 'module' and o.__name__ == '_pemja')\n"
                    + "blocks = sys.getallocatedblocks()\n";

    /** Arguments: the Python executable, its site-packages, how many interpreters, report every. */
    public static void main(String[] args) {
        PythonInterpreterConfig config =
                PythonInterpreterConfig.newBuilder()
                        .setPythonExec(args[0])
                        .addPythonPaths(args[1])
                        .setExcType(PythonInterpreterConfig.ExecType.MULTI_THREAD)
                        .build();
        int interpreters = Integer.parseInt(args[2]);
        int every = Integer.parseInt(args[3]);
        for (int closed = 0; closed <= interpreters; closed++) {
            PythonInterpreter interpreter = new PythonInterpreter(config);
            interpreter.set("context", new Context());
            interpreter.exec("context.emit(1); context.emit('one')");
            if (closed % every == 0) {
                interpreter.exec(COUNT);
                System.out.println(
                        "{\"closed\": " + closed
                                + ", \"method_lists\": " + interpreter.get("method_lists")
                                + ", \"pemja_modules\": " + interpreter.get("pemja_modules")
                                + ", \"blocks\": " + interpreter.get("blocks") + "}");
            }
            interpreter.close(); // finalizes the interpreter's thread state and caches
        }
    }
}

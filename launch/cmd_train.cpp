// `dino train`: DINO pretraining. Flags keep main_dino.py's names, meanings and defaults
// (launch/train_flags.h); the path of one run from here to the kernels is in
// docs/architecture.md, "Follow one run".
#include "distributed/launcher_env.h"
#include "launch/command.h"
#include "launch/learning_monitor.h"
#include "launch/session.h"
#include "launch/train_data.h"
#include "launch/train_flags.h"
#include "launch/training_board.h"
#include "models/registry.h"
#include "ssl/trainer.h"
#include "train/stop_signal.h"

namespace xdino::launch {
namespace {

class TrainCommand : public Command {
 public:
  void declare(Flags& f) override {
    declare_train_flags(f, opt_, monitor_);
    declare_dist_flags(f, dist_);
  }

  int run(const Flags& flags) override {
    ssl::DinoOptions o = opt_;
    o.arch = models::training_arch_name(o.arch);  // deit_small -> vit_small, as main_dino.py
    models::check_arch(o.arch);                   // before any process starts or data opens

    // What only the session knows: the device and (--replicas 0) the cores of this process
    // (launch/session.h auto_replicas); the library takes what it is given.
    const Session session = start_session(dist_, o.device);
    if (o.device == "auto") o.device = session.device.str();
    if (o.replicas == 0) o.replicas = auto_replicas(session, o.batch_size_per_gpu);
    const auto& comm = session.comm;

    ssl::Trainer trainer(
        o, [&](const models::BackboneOptions& bo) { return models::create_backbone(o.arch, bo); },
        open_train_data(o, *comm), comm);
    LearningMonitor monitor(o, monitor_, *comm, trainer.precision().device);
    // config.ini records how checkpoint.pth was made. So it is written only once every option
    // and the checkpoint to resume have been checked (a refused run leaves no config.ini, nor
    // an output folder), and, on a resume, only when this run first replaces checkpoint.pth:
    // a resume that stops before it saves (a NaN loss, a kill) leaves the record of the run
    // that made the checkpoint.
    const std::string record = config_record(flags, o.output_dir);
    const bool resumed = trainer.resume();
    if (!resumed) write_config(flags, record, *comm);
    monitor.measure_reference(*trainer.teacher()->backbone);
    ssl::EpochCallbacks callbacks = monitor.callbacks();
    if (resumed)
      callbacks.saved = [&, written = false]() mutable {
        if (!written) write_config(flags, record, *comm);
        written = true;
      };
    TrainingBoard board(o.output_dir, monitor_.tensorboard, trainer.images_per_step(),
                        trainer.iterations_per_epoch(), *comm, o.recipe.adds_terms());
    board.attach(callbacks);
    trainer.set_epoch_callbacks(callbacks);
    // Stopped before the end (a signal, here or on another rank): saved, exit 0, and the
    // launcher told which, so that it does not record the run's end.
    if (trainer.train() == ssl::TrainOutcome::kStopped)
      distributed::tell_launcher_stopped(train::stop_signal() != 0);
    comm->finalize();
    return 0;
  }

 private:
  ssl::DinoOptions opt_;
  MonitorOptions monitor_;
  distributed::DistOptions dist_;
};

}  // namespace

std::unique_ptr<Command> make_train_command() { return std::make_unique<TrainCommand>(); }

}  // namespace xdino::launch
